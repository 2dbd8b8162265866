import { createRequire } from 'node:module';
import protobuf from 'protobufjs';

const require = createRequire(import.meta.url);

export interface ProviderProbe {
  readonly provider: string;
  readonly ok: boolean;
  /** The error onnxruntime raised when the provider failed to load, verbatim. */
  readonly error?: string;
}

/**
 * The smallest valid ONNX model (y = Identity(x), float[1], opset 17), encoded by hand so that
 * probing providers depends on nothing but protobufjs' wire writer.
 */
export function identityModelBytes(): Uint8Array {
  const w = protobuf.Writer.create();
  const valueInfo = (name: string) => {
    w.fork().uint32(10).string(name); // ValueInfoProto.name
    w.uint32(18).fork(); // .type: TypeProto
    w.uint32(10).fork(); // .tensor_type
    w.uint32(8).int32(1); // elem_type FLOAT
    w.uint32(18).fork().uint32(10).fork().uint32(8).int64(1).ldelim().ldelim(); // shape { dim { dim_value: 1 } }
    w.ldelim().ldelim();
    w.ldelim();
  };
  w.uint32(8).int64(8); // ModelProto.ir_version
  w.uint32(66).fork().uint32(10).string('').uint32(16).int64(17).ldelim(); // opset_import
  w.uint32(58).fork(); // graph
  w.uint32(10).fork().uint32(10).string('x').uint32(18).string('y').uint32(34).string('Identity').ldelim(); // node
  w.uint32(18).string('probe');
  w.uint32(90);
  valueInfo('x');
  w.uint32(98);
  valueInfo('y');
  w.ldelim();
  return w.finish();
}

export function onnxruntimeVersion(): string | undefined {
  try {
    return (require('onnxruntime-node/package.json') as { version: string }).version;
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
