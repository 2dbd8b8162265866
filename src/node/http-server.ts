import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Sends `value` as JSON (errors and API results of every HTTP server Cohort runs). */
export function sendJson(res: http.ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).end(body);
}

/** An HTTP server could not listen (a port another program holds, an address not of this machine); the message names which. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
}

/** Listens on host:port and returns the server's URL; `what` names the server in the error. */
export async function listen(server: http.Server, host: string, port: number, what: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new ListenError(`${what} cannot listen on ${host}:${port}: ${err.message}`, { cause: err })));
    server.listen(port, host, resolve);
  });
  const { port: bound } = server.address() as AddressInfo;
  return `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;
}

/** Closes the server and every connection still open on it. */
export async function closeServer(server: http.Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}
