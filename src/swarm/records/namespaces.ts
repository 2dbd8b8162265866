import { decode as cborDecode, encode as cborEncode } from 'cborg';
import type { z } from 'zod';
import { DEFAULT_MAX_VALUE_BYTES, MAX_VALUE_BYTES_LIMIT, RECORD_NAMESPACE_TTL_MS } from '../constants.js';

/**
 * Every record key belongs to a namespace, its first path segment (`progress`, `group/…`), and every
 * namespace has a schema that values must satisfy. Registered by the layers that own the keys
 * (averaging, optimizer); the swarm only enforces them.
 */
export interface NamespaceSpec<T> {
  readonly schema: z.ZodType<T>;
  /** Largest CBOR-encoded value, bytes. @default DEFAULT_MAX_VALUE_BYTES */
  readonly maxValueBytes: number;
}

const NAME = /^[a-z][a-z0-9_-]{0,63}$/;

export function namespaceOf(key: string): string {
  const slash = key.indexOf('/');
  return slash === -1 ? key : key.slice(0, slash);
}

/** The longest lifetime of an entry under `key`, or undefined when its namespace is not one of the protocol's. */
export function namespaceTtlMs(key: string): number | undefined {
  return Object.hasOwn(RECORD_NAMESPACE_TTL_MS, namespaceOf(key)) ? RECORD_NAMESPACE_TTL_MS[namespaceOf(key)] : undefined;
}

export class NamespaceRegistry {
  private readonly specs = new Map<string, NamespaceSpec<unknown>>();

  register<T>(name: string, schema: z.ZodType<T>, options: { maxValueBytes?: number } = {}): NamespaceSpec<T> {
    if (!NAME.test(name)) throw new RangeError(`record namespace "${name}" is invalid: 1–64 characters of a-z, 0-9, "_", "-", starting with a letter`);
    if (namespaceTtlMs(name) === undefined) throw new RangeError(`record namespace "${name}" is not one of the protocol's (${Object.keys(RECORD_NAMESPACE_TTL_MS).join(', ')}): holders would refuse its entries`);
    const maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
    if (!Number.isInteger(maxValueBytes) || maxValueBytes < 1 || maxValueBytes > MAX_VALUE_BYTES_LIMIT) {
      throw new RangeError(`record namespace "${name}": maxValueBytes ${maxValueBytes} must be an integer from 1 to ${MAX_VALUE_BYTES_LIMIT}`);
    }
    if (this.specs.has(name)) throw new RangeError(`record namespace "${name}" is already registered`);
    const spec: NamespaceSpec<T> = { schema, maxValueBytes };
    this.specs.set(name, spec);
    return spec;
  }

  lookup(key: string): NamespaceSpec<unknown> | undefined {
    return this.specs.get(namespaceOf(key));
  }
}

/** `value`: with `schema`, the decoded CBOR the schema refused (a reader may say what it holds, e.g. another version). */
export type DecodeResult<T> = { ok: true; value: T } | { ok: false; reason: 'value-too-large' | 'malformed' | 'schema'; detail: string; value?: unknown };

/** Decodes and validates a stored value against its namespace's schema. */
export function decodeValue<T>(spec: NamespaceSpec<T>, bytes: Uint8Array): DecodeResult<T> {
  if (bytes.length > spec.maxValueBytes) return { ok: false, reason: 'value-too-large', detail: `${bytes.length} bytes > ${spec.maxValueBytes}` };
  let raw: unknown;
  try {
    raw = cborDecode(bytes);
  } catch (err) {
    return { ok: false, reason: 'malformed', detail: `value is not CBOR (${(err as Error).message})` };
  }
  const parsed = spec.schema.safeParse(raw);
  if (!parsed.success) return { ok: false, reason: 'schema', detail: parsed.error.issues[0]?.message ?? 'schema mismatch', value: raw };
  return { ok: true, value: parsed.data };
}

export function encodeValue(value: unknown): Uint8Array {
  return cborEncode(value);
}
