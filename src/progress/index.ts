// Progress of long runs on stderr: a live line on a terminal, JSON lines elsewhere (docs/progress.md).
export {
  formatDuration,
  formatRate,
  resolveProgressMode,
  startProgress,
  type Progress,
  type ProgressExtra,
  type ProgressLine,
  type ProgressMode,
  type ProgressOptions,
  type ProgressStream,
} from './progress.ts'
