/**
 * Collaborative training's front door (hivemind.Optimizer's semantics on Cohort's swarm): the
 * optimizer and its options, the run's published parameters, the coordinator, and the swarm records
 * others read (progress, leaderboards). Code outside collab/ imports from here, but for the schemas
 * of the run settings and the optimizer's options (run-settings.ts, options.ts): the CLI's flag tables
 * import those directly, as importing this module loads the swarm and onnxruntime.
 */
export { Coordinator, CREDITED_SERIES, FLAGGED_SERIES, type CoordinatorInit } from './coordinator.js';
export { BadStepCounter } from './bad-steps.js';
export { RunRecordUnavailableError, RunSettingsConflictError, TrainingStateError } from './errors.js';
export { exportStream, type ExportFormat, type ExportOptions, type ExportTable } from './export.js';
export { FullStateSaver, loadNewestRunState, loadRunState, loadStateDir, PEER_STATE_CHECKPOINT, saveStateDir, keptRunRecord, SWARM_STATE_CHECKPOINT, type FullStateCheckpoint, type FullStateKind } from './full-state.js';
export { decodeTrainingState, type TrainingState } from './state.js';
export { CollaborativeOptimizer, DATA_MISMATCH_ADVICE, servedStateEpoch, type StepOutcome } from './optimizer.js';
export { averagingModeOf, COLLABORATIVE_OPTION_FIELDS, resolveCollaborativeOptions, type CollaborativeOptions } from './options.js';
export { globalProgress, readyForStep, type GlobalProgress } from './progress.js';
export { trainingMetrics } from './prometheus.js';
export { currentProgress, latestLeaderboard, PROGRESS_KEY, progressRecords, type LeaderboardRecord } from './records.js';
export { collabOptionsOf, describeRunData, describeRunSettings, describeUnreadableRun, joinPeerIds, readRunParams, resolveRunParams, runSettingsOf, type ResolveRunSettings, type RunData, type RunParams } from './run-params.js';
export { DEFAULT_RUN_SETTINGS, type RunSettings } from './run-settings.js';
