import type { DenyDecision } from '../../domain/decision';

/** What every client style's error body is built from. */
export interface ErrorBodyInput {
  decision: DenyDecision;
  httpStatus: number;
  requestId: string;
}
