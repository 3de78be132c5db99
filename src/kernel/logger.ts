// The logger shape every module takes (pino's methods, so a pino logger fits as it is). Library code
// never writes to the console: it logs through what it was given, and through nothing by default.
export interface Logger {
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
}

const noop = (): void => {};

/** The default logger: drops everything. */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop };
