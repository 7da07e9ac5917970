// Starts `pagoda serve` (the binary in $PAGODA) on a free loopback port and stops it with SIGTERM.
import { spawn } from 'node:child_process';

export async function startServer(args = []) {
  const bin = process.env.PAGODA;
  if (!bin) throw new Error('set PAGODA to the pagoda binary');
  const proc = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', '0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${log}`)), 120000);
    proc.stderr.on('data', (chunk) => {
      log += chunk.toString();
      const m = log.match(/serving .* on http:\/\/[\d.]+:(\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    proc.on('exit', (code) => reject(new Error(`server exited ${code}:\n${log}`)));
  });
  return {
    port,
    baseURL: `http://127.0.0.1:${port}/v1`,
    url: `http://127.0.0.1:${port}`,
    log: () => log,
    stop: () =>
      new Promise((resolve) => {
        if (proc.exitCode !== null) return resolve(proc.exitCode);
        proc.removeAllListeners('exit');
        proc.on('exit', (code) => resolve(code));
        proc.kill('SIGTERM');
      }),
  };
}
