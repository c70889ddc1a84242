import fc from 'fast-check';
import {
  addressBytes,
  inRange,
  parseCidr,
  describeRestrictionsProblem,
  restrictionsProblem,
  wideningProblem,
  type AddressRange,
} from '../../../src/keys/key-restrictions';
import { effectiveRestrictions, refusedByRestrictions } from '../../../src/check/pipeline/restriction-step';
import type { AuthRequest } from '../../../src/check/auth-request';
import type { ClassifiedRoute } from '../../../src/check/routes/route';

const range = (cidr: string) => parseCidr(cidr) as AddressRange;
const inside = (address: string, cidr: string) => inRange(addressBytes(address)!, range(cidr));

describe('key restrictions: validation', () => {
  it('accepts each part alone and together; no restrictions at all is an empty object', () => {
    expect(restrictionsProblem({})).toBeUndefined();
    expect(
      restrictionsProblem({
        endpoints: ['chat-completions', '/v1/embeddings', '/v1beta/models/*'],
        readOnly: false,
        models: ['gpt-4o*', 'o3'],
        sourceAddresses: ['10.0.0.0/8', '::1', '2001:db8::/32'],
      }),
    ).toBeUndefined();
  });

  it.each([
    [
      { sourceAddresses: ['10.0.0.0/33'] },
      "restrictions.sourceAddresses: '10.0.0.0/33' is not a CIDR range: the prefix length must be 0 to 32",
    ],
    [{ sourceAddresses: ['2001:db8::/129'] }, 'the prefix length must be 0 to 128'],
    [{ sourceAddresses: ['10.0.0/8'] }, "'10.0.0' is no IPv4 or IPv6 address"],
    [{ sourceAddresses: ['10.0.0.0/08'] }, 'the prefix length must be 0 to 32'],
    [{ endpoints: ['chat'] }, "'chat' is neither a route family (messages, chat-completions, generative-content, models) nor a path"],
    [{ endpoints: [] }, 'restrictions.endpoints: must not be empty: it would refuse every request'],
    [{ models: ['gpt-*-mini'] }, "'*' may only end a pattern"],
    [{ models: ['*'] }, "'*' alone allows every model"],
    [{ models: ['gpt 4'] }, 'contains a space'],
    [{ readOnly: 'yes' }, 'restrictions.readOnly: must be true or false'],
    [{ ips: ['10.0.0.0/8'] }, "restrictions: has no field 'ips'"],
    [{ models: 'gpt-4o' }, 'restrictions.models: must be a list'],
  ])('refuses %j with a specific error', (value, message) => {
    const problem = restrictionsProblem(value);
    expect(problem && describeRestrictionsProblem(problem)).toContain(message);
  });
});

describe('key restrictions: addresses', () => {
  it('matches IPv4 and IPv6 ranges, bit by bit at the prefix boundary', () => {
    expect(inside('10.1.2.3', '10.1.0.0/16')).toBe(true);
    expect(inside('10.2.0.0', '10.1.0.0/16')).toBe(false);
    expect(inside('192.168.1.127', '192.168.1.0/25')).toBe(true);
    expect(inside('192.168.1.128', '192.168.1.0/25')).toBe(false);
    expect(inside('2001:db8:ffff::1', '2001:db8::/32')).toBe(true);
    expect(inside('2001:db9::1', '2001:db8::/32')).toBe(false);
    expect(inside('::1', '::1')).toBe(true);
    expect(inside('1.2.3.4', '0.0.0.0/0')).toBe(true);
  });

  it('reads an IPv4-mapped IPv6 address as its IPv4 address, and an IPv4 address never as another IPv6 range', () => {
    expect(inside('::ffff:10.1.2.3', '10.1.0.0/16')).toBe(true);
    expect(inside('10.1.2.3', '2001:db8::/32')).toBe(false);
    expect(addressBytes('fe80::1%eth0')).toEqual(addressBytes('fe80::1'));
    expect(addressBytes('not an address')).toBeUndefined();
  });

  it('parses the IPv6 text forms, and refuses what is not one', () => {
    const hex = (text: string) => Buffer.from(addressBytes(text)!).toString('hex');
    expect(hex('2001:db8::1')).toBe('20010db8000000000000000000000001');
    expect(hex('::')).toBe('0'.repeat(32));
    expect(hex('1:2:3:4:5:6:7:8')).toBe('00010002000300040005000600070008');
    expect(hex('::ffff:1.2.3.4')).toBe(hex('1.2.3.4'));
    expect(hex('[::1]')).toBe(`${'0'.repeat(31)}1`);
    for (const bad of ['1::2::3', '12345::', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7', '1.2.3.4::', '::g', '256.1.1.1', '1.2.3', ':::']) {
      expect([bad, addressBytes(bad)]).toEqual([bad, undefined]);
    }
    expect(parseCidr('fe80::1%eth0/64')).toContain('no IPv4 or IPv6 address');
  });

  it('reads a dotted-quad IPv4 address exactly when the strict IPv4 grammar accepts it (no leading zeros, octets to 255)', () => {
    const STRICT_IPV4 = /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;
    const mapped = (text: string) =>
      Buffer.from([...Array<number>(10).fill(0), 0xff, 0xff, ...text.split('.').map(Number)]).toString('hex');
    const octet = fc.oneof(fc.integer({ min: 0, max: 300 }).map(String), fc.constantFrom('', '00', '01', '007', '1a', ' 1', '+1'));
    const candidate = fc.oneof(
      fc.array(octet, { minLength: 1, maxLength: 6 }).map((octets) => octets.join('.')),
      fc.stringMatching(/^[0-9.]{0,16}$/),
    );
    fc.assert(
      fc.property(candidate, (text) => {
        const bytes = addressBytes(text);
        if (STRICT_IPV4.test(text)) expect(Buffer.from(bytes!).toString('hex')).toBe(mapped(text));
        else if (!text.includes(':')) expect(bytes).toBeUndefined();
      }),
      { numRuns: 5_000 },
    );
    for (const bad of ['01.2.3.4', '1.2.3.04', '1.2.3.', '.1.2.3', '1..2.3', '1.2.3.4.5', '1.2.3.256', '1.2.3.4 ']) {
      expect([bad, addressBytes(bad)]).toEqual([bad, undefined]);
    }
    expect(Buffer.from(addressBytes('0.0.0.0')!).toString('hex')).toBe(mapped('0.0.0.0'));
    expect(Buffer.from(addressBytes('255.255.255.255')!).toString('hex')).toBe(mapped('255.255.255.255'));
  });
});

describe('key restrictions: a key can only narrow its account', () => {
  it('names what a key allows beyond the account, and accepts what is within', () => {
    const account = { models: ['gpt-4o*'], sourceAddresses: ['10.0.0.0/8'], endpoints: ['/v1/*'] };
    expect(
      wideningProblem({ models: ['gpt-4o-mini'], sourceAddresses: ['10.1.0.0/16'], endpoints: ['/v1/embeddings'] }, account),
    ).toBeUndefined();
    expect(wideningProblem({ models: ['o3'], sourceAddresses: ['10.0.0.0/8'], endpoints: ['/v1/*'] }, account)).toBe(
      "models 'o3' is outside the account's defaults",
    );
    expect(wideningProblem({ models: ['gpt-4o'], sourceAddresses: ['0.0.0.0/0'], endpoints: ['/v1/*'] }, account)).toContain(
      'sourceAddresses',
    );
    // Parts the key leaves out are the account's: they apply to every request anyway.
    expect(wideningProblem({ models: ['gpt-4o'] }, account)).toBeUndefined();
    expect(wideningProblem({}, { readOnly: true })).toBeUndefined();
    expect(wideningProblem({ models: ['x'] }, undefined)).toBeUndefined();
    expect(wideningProblem({ models: ['gpt-4o*'] }, { models: ['gpt-4o-mini*'] })).toContain("'gpt-4o*' is outside");
  });
});

describe('key restrictions: the decision', () => {
  const route = (family: ClassifiedRoute['family'], path: string, style: ClassifiedRoute['style'] = 'chat'): ClassifiedRoute => ({
    family,
    style,
    pathWithoutQuery: path,
  });
  const request = (method: string, path: string, extra: Partial<AuthRequest> = {}): AuthRequest => ({
    method,
    path,
    headers: {},
    requestId: '',
    ...extra,
  });
  const body = (model: string) => Buffer.from(JSON.stringify({ model }));
  const restricted = (key: object, account: object | undefined = undefined) =>
    effectiveRestrictions(JSON.stringify(key), account === undefined ? '' : JSON.stringify(account));

  it('refuses by address first, then endpoint, then model; passes what breaks none', () => {
    const all = restricted({ sourceAddresses: ['10.0.0.0/8'], endpoints: ['/v1/embeddings'], models: ['text-embedding-3*'] });
    const embeddings = route('chat-completions', '/v1/embeddings');
    const ok = request('POST', '/v1/embeddings', { sourceAddress: '10.0.0.1', body: body('text-embedding-3-small') });
    expect(refusedByRestrictions(ok, embeddings, all)).toBeUndefined();
    expect(
      refusedByRestrictions(
        { ...ok, sourceAddress: '11.0.0.1', body: body('gpt-4o') },
        route('chat-completions', '/v1/chat/completions'),
        all,
      )?.kind,
    ).toBe('address');
    expect(refusedByRestrictions({ ...ok, body: body('gpt-4o') }, route('chat-completions', '/v1/chat/completions'), all)?.kind).toBe(
      'endpoint',
    );
    expect(refusedByRestrictions({ ...ok, body: body('gpt-4o') }, embeddings, all)?.reason).toBe('model_not_permitted');
  });

  it('fails closed: no address reported is no permitted address; a generation naming no readable model is refused', () => {
    expect(
      refusedByRestrictions(request('GET', '/v1/models'), route('models', '/v1/models'), restricted({ sourceAddresses: ['::/0'] }))?.reason,
    ).toBe('address_not_permitted');
    const models = restricted({ models: ['gemini-2.5-flash'] });
    expect(
      refusedByRestrictions(request('POST', '/v1/chat/completions'), route('chat-completions', '/v1/chat/completions'), models)?.reason,
    ).toBe('model_not_readable');
    // A cut-short body is no complete JSON document: no model is read from it.
    const partial = request('POST', '/v1/chat/completions', { body: Buffer.from('{"model":"gemini-2.5-flash","messages":[') });
    expect(refusedByRestrictions(partial, route('chat-completions', '/v1/chat/completions'), models)?.reason).toBe('model_not_readable');
    expect(refusedByRestrictions(request('GET', '/v1/models'), route('models', '/v1/models'), models)).toBeUndefined();
    const gemini = (model: string) => route('generative-content', `/v1beta/models/${model}:generateContent`, 'generative');
    expect(refusedByRestrictions(request('POST', ''), gemini('gemini-2.5-flash'), models)).toBeUndefined();
    expect(refusedByRestrictions(request('POST', ''), gemini('gemini-2.5-pro'), models)?.reason).toBe('model_not_permitted');
    expect(refusedByRestrictions(request('POST', ''), gemini('%ZZ'), models)?.reason).toBe('model_not_readable');
  });

  it('matches endpoints on the path the upstream acts on, so dot segments do not slip past', () => {
    const embeddingsOnly = restricted({ endpoints: ['/v1/embeddings'] });
    const sneaky = route('chat-completions', '/v1/embeddings/../chat/completions');
    expect(refusedByRestrictions(request('POST', sneaky.pathWithoutQuery), sneaky, embeddingsOnly)?.reason).toBe('endpoint_not_permitted');
  });

  it("applies the account's defaults and the key's own together", () => {
    const both = restricted({ models: ['o3'] }, { models: ['gpt-4o*'] });
    const chat = route('chat-completions', '/v1/chat/completions');
    expect(refusedByRestrictions(request('POST', '', { body: body('o3') }), chat, both)?.reason).toBe('model_not_permitted');
    expect(refusedByRestrictions(request('POST', '', { body: body('gpt-4o') }), chat, both)?.reason).toBe('model_not_permitted');
    const readOnly = restricted({}, { readOnly: true });
    expect(refusedByRestrictions(request('POST', '', { body: body('gpt-4o') }), chat, readOnly)?.reason).toBe('endpoint_not_permitted');
    expect(refusedByRestrictions(request('GET', '/v1/models'), route('models', '/v1/models'), readOnly)).toBeUndefined();
  });

  it('refuses to compile stored texts that are not valid restrictions', () => {
    expect(() => effectiveRestrictions('{"models":[]}', '')).toThrow('stored restrictions are invalid');
    expect(() => effectiveRestrictions('', 'not json')).toThrow('stored restrictions are not JSON');
  });
});
