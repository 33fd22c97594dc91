/**
 * The confirmation page in a real browser: Debian's chromium, headless,
 * driven by playwright-core. Opening the link verifies nothing; clicking the
 * one button does, and then the share can be fetched. The page shows the
 * key's fingerprint grouped as the CLI prints it; opened again it says
 * "already confirmed"; the server's own address and unknown paths get pages.
 */
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { fetchShare, publish } from '../../src/keyserver/client.js';
import { fingerprintLines } from '../../src/vault/fingerprint-display.js';
import { fingerprintOf, formatFingerprint } from '../../src/vault/fingerprint.js';
import { needFacility } from '../helpers/facility.js';
import { identityPublicKey, startTestServer, tempDir } from './harness.js';

const CHROMIUM = '/usr/bin/chromium';

test('open the verification link in headless Chromium, click the button, then fetch works', async () => {
  if (!needFacility(existsSync(CHROMIUM), 'chromium', `${CHROMIUM} is missing (apt-get install chromium)`)) return;
  const s = await startTestServer();
  const profile = tempDir('chromium');
  const key = identityPublicKey();
  let browser: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | undefined;
  try {
    // A fresh profile folder per run (playwright passes it as --user-data-dir).
    browser = await chromium.launchPersistentContext(profile.path, {
      executablePath: CHROMIUM,
      headless: true,
      timeout: 60_000,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const pub = await publish(s.url, key, 'browser.user@example.org');
    const link = s.sink.lastLink('browser.user@example.org');
    const page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(20_000);
    const response = await page.goto(link);
    assert.is(response?.status(), 200);
    assert.is(await page.title(), 'Confirm your email address');
    assert.match((await page.textContent('body')) ?? '', /b\*\*\*@example\.org/);
    assert.is(await page.locator('button').count(), 1);
    // The key being vouched for, grouped as `stash vault identity show` prints it.
    const fingerprint = formatFingerprint(fingerprintOf(key.subarray(1, 33), key.subarray(33, 65)));
    assert.is(await page.textContent('#fingerprint'), fingerprint);
    assert.is(await page.textContent('#fingerprint-groups'), fingerprintLines(fingerprint).join('\n'));
    try {
      await fetchShare(s.url, pub.code);
      assert.unreachable('opening the page verified the share');
    } catch (err) {
      assert.is((err as { code?: string }).code, 'SHARE_PENDING');
    }
    await Promise.all([page.waitForNavigation(), page.click('#confirm')]);
    assert.is(await page.title(), 'Address confirmed');
    assert.match((await page.textContent('#confirmed')) ?? '', /is confirmed/);
    const fetched = await fetchShare(s.url, pub.code);
    assert.ok(fetched.publicKey.equals(key));
    assert.is(fetched.email, 'browser.user@example.org');
    // Opened again: the link is used up, and the page says it was confirmed.
    const reopened = await page.goto(link);
    assert.is(reopened?.status(), 200);
    assert.is(await page.title(), 'Already confirmed');
    assert.match((await page.textContent('#already-confirmed')) ?? '', /was already confirmed with this link/);
    assert.is(await page.textContent('#fingerprint'), fingerprint);
    assert.is(await page.locator('button').count(), 0);
    // The server itself and an unknown path: small pages, not a binary download.
    const home = await page.goto(`${s.url}/`);
    assert.is(home?.status(), 200);
    assert.is(await page.title(), 'stash key server');
    const unknown = await page.goto(`${s.url}/no/such/page`);
    assert.is(unknown?.status(), 404);
    assert.is(await page.title(), 'Page not found');
  } finally {
    await browser?.close();
    await s.stop();
    profile.remove();
  }
});

test.run();
