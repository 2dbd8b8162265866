import { METHOD_INPUTS, type CohortCalls } from '../shared/api.js';
import { isMethodName } from '../shared/channels.js';

/** A request the receiving side refuses (unknown verb, bad argument); transports map it to 400 / an error result. */
export class ApiRequestError extends Error {
  override readonly name = 'ApiRequestError';
}

/**
 * Calls one verb with an argument that arrived over a transport (HTTP body, IPC, message port),
 * validated against the verb's schema first, so every transport checks input the same way.
 */
export async function dispatch(calls: CohortCalls, method: string, input: unknown): Promise<unknown> {
  if (!isMethodName(method)) throw new ApiRequestError(`unknown API method "${method}"`);
  const schema = METHOD_INPUTS[method];
  if (schema === null) {
    if (input !== undefined && input !== null) throw new ApiRequestError(`${method} takes no argument`);
    return (calls[method] as () => Promise<unknown>).call(calls);
  }
  const parsed = schema.safeParse(input ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ApiRequestError(`${method}: invalid argument${issue?.path.length ? ` at ${issue.path.join('.')}` : ''}: ${issue?.message ?? 'bad value'}`);
  }
  return (calls[method] as (arg: unknown) => Promise<unknown>).call(calls, parsed.data);
}
