/**
 * `stash doctor`'s session lock checks, from the agent's status
 * (`sessionLock`, src/agent/lock/session-lock.ts): one line per lock source it
 * watches, and one that says whether a locked screen wipes the keys, a
 * [warn] when no source is available (keys then stay cached while the screen
 * is locked; docs/suspend.md, "Session lock").
 */
import type { DoctorCheck } from './doctor-checks.js';

type Doc = Record<string, unknown>;

const obj = (v: unknown): Doc => (typeof v === 'object' && v !== null ? (v as Doc) : {});

/** What each source watches, in words. */
const LABELS: Record<string, { name: string; signals: string }> = {
  logind: { name: 'logind session', signals: 'Lock, Unlock, LockedHint' },
  screensaver: { name: 'session bus screensaver', signals: 'ActiveChanged' },
  wts: { name: 'Windows session', signals: 'WTS_SESSION_LOCK, WTS_SESSION_UNLOCK' },
  distributed: { name: 'macOS screen lock', signals: 'com.apple.screenIsLocked, com.apple.screenIsUnlocked' },
};

const FIX =
  "run stash inside your desktop session (logind must know the agent's session: from its pid, or XDG_SESSION_ID), " +
  'or use a desktop with a screensaver on the session bus (org.freedesktop.ScreenSaver, org.gnome.ScreenSaver); ' +
  'to keep keys cached while the screen is locked on purpose, set agent.lock_on_screen_lock = false';

export function sessionLockChecks(status: Doc | null): DoctorCheck[] {
  const section = 'lock' as const;
  if (!status)
    return [
      {
        section,
        name: 'screen lock wipe',
        status: 'info',
        detail: 'skipped: the agent is not running (see Session agent above)',
      },
    ];
  const lock = obj(status.sessionLock);
  if (lock.enabled === false) {
    return [
      {
        section,
        name: 'screen lock wipe',
        status: 'info',
        detail: 'off (agent.lock_on_screen_lock = false): keys stay cached while the session is locked',
      },
    ];
  }
  const sources = Array.isArray(lock.sources) ? (lock.sources as Doc[]) : [];
  const checks: DoctorCheck[] = [];
  const watched: string[] = [];
  for (const s of sources) {
    const label = LABELS[String(s.source)] ?? { name: String(s.source), signals: '' };
    if (s.available === true) {
      watched.push(label.name);
      const what = s.watching ? `${String(s.watching)}: ` : '';
      checks.push({ section, name: label.name, status: 'ok', detail: `watching ${what}${label.signals}` });
    } else {
      checks.push({
        section,
        name: label.name,
        status: 'info',
        detail: `not watched: ${String(s.reason ?? s.state ?? 'unknown')}`,
      });
    }
  }
  const now = lock.locked === true ? '; the session is locked now, so no key is cached' : '';
  if (watched.length > 0) {
    checks.push({
      section,
      name: 'screen lock wipe',
      status: 'ok',
      detail: `keys are wiped when the session locks (through the ${watched.join(' and the ')})${now}`,
    });
  } else {
    const why =
      sources.length === 0
        ? String(lock.reason ?? 'no lock source on this platform')
        : 'no lock source is available (see above)';
    checks.push({
      section,
      name: 'screen lock wipe',
      status: 'warn',
      detail: `${why}: keys stay cached while the screen is locked`,
      fix: FIX,
    });
  }
  return checks;
}
