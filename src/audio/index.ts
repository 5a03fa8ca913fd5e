export { AudioError, type AudioErrorCode } from './errors.js';
export { type AudioFormat, type AudioTarget } from './targets.js';
export { checkAudioUrl } from './url-check.js';
export { resolveFfmpegPath } from './ffmpeg.js';
export {
  createAudioPipeline,
  type AudioPipeline,
  type AudioPipelineInternals,
  type AudioPipelineOptions,
  type PreparedAudio,
} from './pipeline.js';
