/**
 * An ffmpeg lavfi source that sounds enough like speech for an encoder's mode decisions: a voiced
 * buzz (eight harmonics of a pitch gliding around 110 Hz) in syllables of about 140 ms, phrases
 * of 2.5 s with 1.5 s pauses of silence. Used by the bitrate measurement script and the tests
 * (no text-to-speech engine is needed).
 */
export function SPEECH_LIKE_FILTER(seconds: number, sampleRate: number): string {
  const f0 = '(110+30*sin(2*PI*0.7*t))';
  const harmonics = [1, 2, 3, 4, 5, 6, 7, 8].map((k) => `${(1 / k).toFixed(3)}*sin(${2 * k}*PI*${f0}*t)`).join('+');
  return `aevalsrc='(${harmonics})*0.25*max(0,sin(2*PI*3.5*t))*lt(mod(t,4),2.5)':s=${sampleRate}:d=${seconds}`;
}
