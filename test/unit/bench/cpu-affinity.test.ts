/**
 * The tail phase's CPU split: the arithmetic, and taskset against real
 * processes (their affinity read back from /proc, as the kernel holds it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as os from 'node:os';
import { allowedCpusOf, onCpus, pinProcessTree, tailCpuSplit, tasksetArguments } from '../../bench/cpu-affinity';
import { processTree } from '../../bench/proc-stats';

describe('tailCpuSplit', () => {
  it('keeps the first CPU for the server under test and gives the rest to everything else', () => {
    expect(tailCpuSplit(2)).toEqual({ server: '0', others: '1', all: '0-1' });
    expect(tailCpuSplit(8)).toEqual({ server: '0', others: '1-7', all: '0-7' });
  });

  it('splits nothing on one CPU', () => {
    expect(tailCpuSplit(1)).toBeUndefined();
    expect(tailCpuSplit(0)).toBeUndefined();
  });
});

describe('taskset command lines', () => {
  it('sets every thread of a running process', () => {
    expect(tasksetArguments(4242, '1-3')).toEqual(['--all-tasks', '--cpu-list', '--pid', '1-3', '4242']);
  });

  it('starts a command on given CPUs, or as it is without them', () => {
    expect(onCpus('1', 'h2load', ['--clients', '10'])).toEqual({
      command: 'taskset',
      args: ['--cpu-list', '1', 'h2load', '--clients', '10'],
    });
    expect(onCpus(undefined, 'h2load', ['--clients', '10'])).toEqual({ command: 'h2load', args: ['--clients', '10'] });
  });
});

describe('taskset on real processes', () => {
  const lastCpu = String(os.availableParallelism() - 1);
  const every = os.availableParallelism() > 1 ? `0-${lastCpu}` : '0';
  let children: ChildProcess[] = [];

  afterEach(() => {
    for (const child of children) child.kill('SIGKILL');
    children = [];
  });

  /** A shell whose child sleeps: a process tree of two. */
  async function shellWithChild(): Promise<number> {
    const shell = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
    children.push(shell);
    for (let tries = 0; tries < 100; tries += 1) {
      if (processTree(shell.pid!).length === 2) return shell.pid!;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('the shell never started its child');
  }

  it('moves a process and the processes under it, and back', async () => {
    const root = await shellWithChild();
    const [, child] = processTree(root);
    pinProcessTree(root, lastCpu);
    expect(allowedCpusOf(root)).toBe(lastCpu);
    expect(allowedCpusOf(child!)).toBe(lastCpu);
    pinProcessTree(root, every);
    expect(allowedCpusOf(root)).toBe(every);
    expect(allowedCpusOf(child!)).toBe(every);
  });

  it('starts a command on the CPUs asked for', async () => {
    const { command, args } = onCpus(lastCpu, 'sleep', ['30']);
    const started = spawn(command, args, { stdio: 'ignore' });
    children.push(started);
    await new Promise((resolve) => started.once('spawn', resolve));
    // taskset execs the command in its own process: the pid's affinity is the command's once exec has happened.
    let cpus = '';
    for (let tries = 0; tries < 100 && cpus !== lastCpu; tries += 1) {
      cpus = allowedCpusOf(started.pid!);
      if (cpus !== lastCpu) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(cpus).toBe(lastCpu);
  });

  it('says which process and which CPUs when taskset refuses', () => {
    const root = process.pid;
    expect(() => pinProcessTree(root, '4096')).toThrow(new RegExp(`could not set the CPUs of pid ${root} to 4096 with taskset`));
  });
});
