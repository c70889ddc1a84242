/// <reference types="jest" />
/**
 * @types/jest declares the asymmetric matchers (`expect.any(String)`, `expect.stringMatching(...)`, ...) as
 * returning `any`, so every use inside an expected object would be an unsafe assignment to the type-aware
 * lint. These overloads give them their real type; declaration merging puts them before the `any` ones.
 */
declare namespace jest {
  interface Expect {
    anything(): AsymmetricMatcher;
    any(classType: unknown): AsymmetricMatcher;
    arrayContaining<E = unknown>(arr: readonly E[]): AsymmetricMatcher;
    closeTo(num: number, numDigits?: number): AsymmetricMatcher;
    objectContaining<E = object>(obj: E): AsymmetricMatcher;
    stringMatching(str: string | RegExp): AsymmetricMatcher;
    stringContaining(str: string): AsymmetricMatcher;
  }
  interface InverseAsymmetricMatchers {
    arrayContaining<E = unknown>(arr: readonly E[]): AsymmetricMatcher;
    objectContaining<E = object>(obj: E): AsymmetricMatcher;
    stringMatching(str: string | RegExp): AsymmetricMatcher;
    stringContaining(str: string): AsymmetricMatcher;
  }
}
