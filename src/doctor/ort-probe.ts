import { createRequire } from 'node:module';
import { encodeModel, Graph } from '../engine/index.js';

const localRequire = createRequire(import.meta.url);

export interface ProviderProbe {
  readonly provider: string;
  readonly ok: boolean;
  /** The error onnxruntime raised when the provider failed to load, verbatim. */
  readonly error?: string;
}

/** The smallest model worth probing with: y = Identity(x), float[1], built with the engine's graph builder. */
export function identityModelBytes(): Uint8Array {
  const g = new Graph('float32');
  g.output(g.input('x', [1]), 'y');
  return encodeModel(g, 'probe');
}

export function onnxruntimeVersion(): string | undefined {
  try {
    return (localRequire('onnxruntime-node/package.json') as { version: string }).version;
  } catch {
    return undefined;
  }
}

/** Creates a session with exactly one execution provider and runs it once; reports the real error if it fails. */
export async function probeProvider(provider: string): Promise<ProviderProbe> {
  try {
    const ort = await import('onnxruntime-node');
    ort.env.logLevel = 'fatal'; // the failure is reported below; keep ORT's native log off the console
    const session = await ort.InferenceSession.create(identityModelBytes(), { executionProviders: [provider], logSeverityLevel: 4 });
    const out = await session.run({ x: new ort.Tensor('float32', new Float32Array([3]), [1]) });
    await session.release();
    const y = out.y?.data as Float32Array | undefined;
    if (y?.[0] !== 3) return { provider, ok: false, error: 'session ran but returned a wrong value' };
    return { provider, ok: true };
  } catch (err) {
    return { provider, ok: false, error: (err as Error).message.split('\n')[0] };
  }
}
