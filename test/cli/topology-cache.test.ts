/**
 * src/cli/topology-cache.ts: the topologies a client learned, per cluster, in
 * its cache folder. A newer topology_version replaces an older one and never
 * the reverse; the file holds only the public topology; a damaged file is
 * ignored (and replaced by the next save); lookups find a cluster by the URL
 * that was configured for it or by a server it lists.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cacheDir, cachedTopologyFor, saveTopology } from '../../src/cli/topology-cache.js';
import type { TopologyResponse } from '../../src/keyserver/wire/messages.js';

const home = mkdtempSync(join(tmpdir(), 'stash-topology-cache-'));
const env = { HOME: home, XDG_CACHE_HOME: join(home, 'cache') };
const dir = join(home, 'cache', 'stash');
const file = join(dir, 'topology-prod.json');

const topo = (version: number, promoted: number[] = []): TopologyResponse => ({
  clusterId: 'prod',
  topologyVersion: version,
  serverId: 0,
  servers: [
    { id: 0, url: 'https://a.example.org', status: 'active' },
    { id: 1, url: 'https://b.example.org', status: 'standby' },
  ],
  routes: [{ owner: 0, primary: 0, failovers: [1] }],
  promotedOwners: promoted,
});

test.after(() => rmSync(home, { recursive: true, force: true }));

test('the folder: XDG_CACHE_HOME/stash, ~/.cache/stash, and the macOS and Windows places', () => {
  assert.is(cacheDir({ HOME: '/h', XDG_CACHE_HOME: '/x' }, 'linux'), '/x/stash');
  assert.is(cacheDir({ HOME: '/h', XDG_CACHE_HOME: 'relative' }, 'linux'), '/h/.cache/stash');
  assert.is(cacheDir({ HOME: '/h' }, 'darwin'), '/h/Library/Caches/stash');
  assert.is(
    cacheDir({ HOME: '/h', LOCALAPPDATA: 'C:\\Users\\a\\AppData\\Local' }, 'win32'),
    join('C:\\Users\\a\\AppData\\Local', 'stash', 'cache'),
  );
});

test('saved per cluster, owner-only, public fields only; found by the configured URL or a listed server', () => {
  saveTopology(topo(1), 'https://a.example.org/', ['https://keys.example.org'], env);
  assert.is(statSync(dir).mode & 0o777, 0o700);
  assert.is(statSync(file).mode & 0o777, 0o600);
  const doc = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  assert.equal(Object.keys(doc).sort(), [
    'askedAt',
    'clusterId',
    'format',
    'learnedFrom',
    'savedAt',
    'topology',
    'topologyVersion',
  ]);
  assert.equal(doc.askedAt, ['https://keys.example.org']);
  assert.is(doc.learnedFrom, 'https://a.example.org');
  assert.is(cachedTopologyFor(['https://keys.example.org/'], env)?.topology.topologyVersion, 1);
  assert.is(cachedTopologyFor(['https://b.example.org'], env)?.learnedFrom, 'https://a.example.org');
  assert.is(cachedTopologyFor(['https://other.example.org'], env), null);
});

test('a newer topology_version replaces an older one, never the reverse', () => {
  saveTopology(topo(3, [0]), 'https://b.example.org', ['https://b.example.org'], env);
  assert.equal(
    cachedTopologyFor(['https://keys.example.org'], env)?.topology.promotedOwners,
    [0],
    'still found by the first URL',
  );
  saveTopology(topo(2), 'https://a.example.org', ['https://a.example.org'], env);
  const kept = cachedTopologyFor(['https://a.example.org'], env)!;
  assert.is(kept.topology.topologyVersion, 3, 'an older answer does not roll the cache back');
  assert.is(kept.learnedFrom, 'https://b.example.org');
});

test('a damaged file is ignored, and the next save replaces it', () => {
  const bad = [
    'not json',
    '{"format":1}',
    JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), askedAt: ['https://user:pw@keys.example.org'] }),
    JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), topologyVersion: 4 }),
  ];
  for (const text of bad) {
    writeFileSync(file, text);
    assert.is(cachedTopologyFor(['https://keys.example.org', 'https://a.example.org'], env), null, text.slice(0, 60));
  }
  saveTopology(topo(1), 'https://a.example.org', ['https://a.example.org'], env);
  assert.is(cachedTopologyFor(['https://a.example.org'], env)?.topology.topologyVersion, 1);
});

test('a cluster id that is no file name is hashed; an unwritable folder is silent', () => {
  saveTopology({ ...topo(1), clusterId: '../../etc/x' }, 'https://a.example.org', ['https://z.example.org'], env);
  assert.is(cachedTopologyFor(['https://z.example.org'], env)?.topology.clusterId, '../../etc/x');
  const blocked = { HOME: home, XDG_CACHE_HOME: join(home, 'file-not-folder') };
  writeFileSync(join(home, 'file-not-folder'), '');
  saveTopology(topo(1), 'https://a.example.org', ['https://a.example.org'], blocked);
  assert.is(cachedTopologyFor(['https://a.example.org'], blocked), null);
});

test('server URLs written as the /v1/share endpoint are kept as the base and found by either spelling', () => {
  const spelled: TopologyResponse = {
    ...topo(1),
    clusterId: 'spelled',
    servers: [
      { id: 0, url: 'https://s0.example.org/v1/share', status: 'active' },
      { id: 1, url: 'https://s1.example.org/v1/share/', status: 'standby' },
    ],
  };
  saveTopology(spelled, 'https://s0.example.org/v1/share', ['https://s0.example.org/v1/share'], env);
  const doc = JSON.parse(readFileSync(join(dir, 'topology-spelled.json'), 'utf8')) as {
    learnedFrom: string;
    askedAt: string[];
    topology: TopologyResponse;
  };
  assert.is(doc.learnedFrom, 'https://s0.example.org');
  assert.equal(doc.askedAt, ['https://s0.example.org']);
  assert.equal(
    doc.topology.servers.map((s) => s.url),
    ['https://s0.example.org', 'https://s1.example.org'],
  );
  for (const configured of [
    'https://s0.example.org',
    'https://s0.example.org/v1/share',
    'https://s1.example.org/',
    'https://s1.example.org/v1/share',
  ]) {
    assert.is(cachedTopologyFor([configured], env)?.topology.clusterId, 'spelled', configured);
  }
  // A file an earlier version wrote, with the URLs as the server advertised them, is found the same way.
  writeFileSync(
    join(dir, 'topology-spelled.json'),
    JSON.stringify({ ...doc, askedAt: ['https://s0.example.org/v1/share'], topology: spelled }),
  );
  for (const configured of ['https://s0.example.org', 'https://s1.example.org/v1/share']) {
    assert.is(cachedTopologyFor([configured], env)?.topology.clusterId, 'spelled', configured);
  }
});

test.run();
