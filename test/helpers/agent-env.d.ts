// Types of agent-env.js (plain JavaScript, shared with bench/agent-lib.js).
import type { ChildProcess } from 'node:child_process';

/** The environment of an agent whose every file is inside `home`; `extra` wins, undefined unsets. */
export function privateAgentEnv(home: string, extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv;

/** Waits until the agent `proc` accepts connections on `sock`. */
export function waitListening(
  proc: ChildProcess,
  sock: string,
  timeoutMs?: number,
  stderr?: () => string,
): Promise<void>;

/** True when a connection to the Unix socket `path` is accepted. */
export function accepts(path: string): Promise<boolean>;
