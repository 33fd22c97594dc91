/**
 * The one error base class of stash. Every failure that reaches a user carries
 * a stable string `code`; the CLI maps codes to exit statuses and the key server
 * maps them to HTTP statuses, each in one place.
 *
 * Messages must never contain key bytes, tokens or passwords.
 */
export class StashError extends Error {
  readonly code: string;
  /** True when the message is safe and useful to show to a remote caller. */
  readonly expose: boolean;

  constructor(code: string, message: string, options?: { cause?: unknown; expose?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.expose = options?.expose ?? true;
  }
}

/** Native addon missing, failed to load, or a native call failed. */
export class NativeError extends StashError {}

/** Bad command-line usage. */
export class UsageError extends StashError {
  constructor(message: string) {
    super('USAGE', message);
  }
}

/** A configuration file or environment value that cannot be used. */
export class ConfigError extends StashError {
  /** `setting`: the environment variable the error is about, when it is one that `stash doctor` reports apart. */
  constructor(
    message: string,
    readonly setting?: string,
  ) {
    super('CONFIG', message);
  }
}

/** The `code` of any thrown value, when it has one. */
export function errorCode(err: unknown): string | undefined {
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const code = (err as { code: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** A one-line message for any thrown value, without its stack. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
