// The window-change gate (docs/window-gate.md): the four places the window lives in, their
// effective rope tables compared bit for bit, stale limits, cache geometry, reused seeds, and the
// hook against the decoder above the native window, and the needle law.
export { runGate, defaultNativeTokens, type GateOptions } from './gate.ts'
export type { GateReport } from './gate-report.ts'
export { renderReport, angleTable } from './report.ts'
export type { Finding, FindingStatus } from './finding.ts'
export { parseEnvFile, type EnvEntry } from './env-file.ts'
export { LAUNCH_KEYS, LAUNCH_DEFAULTS, LAUNCH_FIELD, DEADLINE_KEY, WINDOW_SIZED_DEADLINES, loadLaunchParams, originOf, parseLaunchParams, type LaunchKeySpec, type LaunchParams } from './launch.ts'
export {
  PLACE_NAMES, PLACE_TITLES, configFileOf, launchPlace, readConfigPlace, readSidecarPlace,
  type ConfigPlace, type FieldSource, type Place, type PlaceName, type PlaceRope, type PlaceStructure, type RopeParamName, type SidecarPlace,
} from './places.ts'
export { firstTableDifference, tableIdentity, type EffectiveTable, type TableDifference } from './table-diff.ts'
export { angleErrorAt, firstPositionExceeding, invPair, plotPositions, reportPositions, type AngleErrorPoint } from './angle-error.ts'
export { checkLayerType, checkRopeTables, differingParams, groupPlaces, DEFAULT_ANGLE_THRESHOLD, type AngleReport, type FieldDifference, type LayerTypeVerdict, type Outlier } from './rope-check.ts'
export { checkStructure, type StructureDifference } from './structure-check.ts'
export { checkSidecarClaims } from './sidecar-check.ts'
export { captureBytes, checkLimits, longestBridgedPrompt, type LimitContext } from './limits.ts'
export { blockDataBytes, blockHeaderAllowance, windowStoreBytes, HEADER_ALLOWANCE, type BlockGeometry } from './block-bytes.ts'
export { checkStore, surveyStore, type StoreCheckOptions, type StoreSurvey } from './store-check.ts'
export { SeedLedger, SEED_LEDGER_FORMAT, documentBlockHashes, type LedgerEntry, type SeedReuse } from '../needle/seed-ledger.ts'
export { bridgeVsNative, compareCacheDumps, freshSeed, seededPrompt, type ArrayDifference, type NativeCheckOptions, type NativeCheckResult } from './native-check.ts'
export {
  checkNeedleLaw, defaultNeedleTokens, judgeNeedleRun, needleAnswerBudget, needleGeometry, needleMinDistance, readNeedleEvidence, runLiveNeedle, NO_NEEDLE_EVIDENCE,
  type LiveNeedleOptions, type LiveNeedleOutcome, type NeedleEvidenceFile, type NeedleGeometry, type NeedleJudgement, type NeedleLawContext, type NeedleLawOptions,
    type NeedleLawResult, type NeedleLawSetup, type NeedleRunStatus,
} from './needle-check.ts'
export { angleErrorSvg, type AnglePlot } from './svg-plot.ts'
export { mergeFrontConfig, readFrontConfigForGate, type FrontConfigForGate, type FrontConfigPaths } from './front-config.ts'
