import type { Currency } from '../../accounts/money';
import type { PriceTable } from '../../metering/price-table';
import type { RatePlan } from '../../accounts/limits/rate-limits';
import type { TokenBudgetPlan } from '../../accounts/limits/token-budgets';
import type { HeaderNames } from '../routes/header-names';
import type { RouteTable } from '../routes/route-table';

/**
 * The slice of settings the decision pipeline reads. Declared here, not in
 * pipeline/ or settings/, so that settings builds it and the pipeline reads
 * it without either importing the other.
 */
export interface PipelineSettings {
  routeTable: RouteTable;
  headerNames: HeaderNames;
  /** Accepted values of the messages-style version header. */
  acceptedVersions: readonly string[];
  acceptQueryKey: boolean;
  /** Limits for keys and accounts without overrides. */
  defaultPlan: RatePlan;
  /** Token budgets for keys and accounts without overrides; none unless the config file sets some. */
  defaultTokenBudgets: TokenBudgetPlan;
  /**
   * The config file's price table; absent: usage is counted in tokens and
   * nothing is charged for it. Here because Check refuses unpriced models
   * under `unpricedModels: refuse`; metering reads the same table.
   */
  pricing?: PriceTable;
  /** What amounts count, for the money a denial names (a spend cap); absent: DEFAULT_CURRENCY. The same object as Settings.currency. */
  currency?: Currency;
}
