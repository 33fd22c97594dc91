/**
 * The server's log: one line per event, `<ISO time> <level> <message>`, on
 * stderr (systemd and the install issue redirect it to the log file). Messages
 * must never contain tokens, keys or full email addresses.
 */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** A logger writing to `stream` (stderr by default; --log-file: disk/rotating-log.ts). */
export function streamLogger(
  stream: { write(text: string): unknown } = process.stderr,
  clock: () => Date = () => new Date(),
): Logger {
  const line = (level: string, message: string) => {
    stream.write(`${clock().toISOString()} ${level} ${message.replace(/[\r\n]+/g, ' ')}\n`);
  };
  return {
    info: (m) => line('info', m),
    warn: (m) => line('WARN', m),
    error: (m) => line('ERROR', m),
  };
}
