// Runs on the platform a prebuild is for (linux-x64 for real, linux-arm64 under
// qemu-user, win32-x64 under Wine), from a staged copy of the package that holds
// only that platform's prebuild and no build/ folder, so the addon can only come
// from prebuilds/. Prints one JSON line:
//   {platform, arch, node, addon, peer | processInfo, roundTrip, error?}
// STASH_PROBE_AUTOSTART=0: the agent was started beside us (qemu-user cannot
// start a child by the arm64 node's own path without binfmt).
import { createRequire } from 'node:module';
import { createServer, connect } from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

const out = { platform: process.platform, arch: process.arch, node: process.version };

/** Linux: the kernel's SO_PEERCRED for a real Unix socket must name this very process. */
async function peerCheck(native) {
  const dir = mkdtempSync(join(tmpdir(), 'stash-probe-'));
  const path = join(dir, 's');
  const server = createServer();
  try {
    server.listen(path);
    await once(server, 'listening');
    const accepted = once(server, 'connection');
    const client = connect(path);
    const [socket] = await accepted;
    const cred = native.peerCredentials(socket);
    client.destroy();
    socket.destroy();
    return { pid: cred.pid === process.pid, uid: cred.uid === process.getuid() };
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

try {
  const { loadBinding, packageRoot } = await import('./dist/native/binding.js');
  const binding = loadBinding();
  out.addon = relative(
    packageRoot,
    createRequire(join(packageRoot, 'package.json'))('node-gyp-build').resolve(packageRoot),
  ).replace(/\\/g, '/');
  out.addonPlatform = binding.platform;
  const native = await import('./dist/native/index.js');
  if (process.platform === 'win32') {
    // The counterpart of peerCredentials there: process identity through the addon
    // (the pipe's client and server SID checks run in the agent round trip below).
    const info = binding.processInfo(process.pid);
    out.processInfo = { ppid: typeof info?.ppid === 'number', startTime: typeof info?.startTime === 'string' };
  } else {
    out.peer = await peerCheck(native);
  }
  const { connectAgent } = await import('./dist/agent/autostart.js');
  const client = await connectAgent({ autostart: process.env.STASH_PROBE_AUTOSTART !== '0', waitMs: 60_000 });
  const id = Buffer.alloc(16, 7);
  const key = Buffer.alloc(32, 0x5a);
  await client.put(id, key, { path: 'probe', ttl: 60 });
  const got = await client.get(id);
  out.roundTrip = got ? got.key.equals(key) : false;
  await client.stop();
} catch (err) {
  out.error = `${err.code ?? ''} ${err.stack ?? err}`;
}
console.log(JSON.stringify(out));
