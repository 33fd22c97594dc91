/**
 * Just enough of a TLS ClientHello (RFC 8446 section 4.1.2, the same layout
 * in TLS 1.2) to tell an ACME TLS-ALPN-01 validation from a client: the
 * server name (SNI, RFC 6066) and the ALPN protocol list (RFC 7301). node
 * picks a certificate (SNICallback) before it learns the ALPN list, so the
 * port guard (port-guard.ts) reads them from the bytes first.
 *
 * Pure: bytes in, names out; anything malformed or cut short is `undefined`.
 */

export interface ClientHelloInfo {
  /** The host_name of the server_name extension, lower-cased; undefined when absent. */
  servername: string | undefined;
  /** The protocols of the ALPN extension, in the client's order; empty when absent. */
  alpn: string[];
}

const EXT_SERVER_NAME = 0;
const EXT_ALPN = 16;

class Reader {
  constructor(
    private readonly b: Buffer,
    public at: number,
    private readonly end: number,
  ) {}
  need(n: number): void {
    if (this.at + n > this.end) throw new RangeError('short');
  }
  u8(): number {
    this.need(1);
    return this.b[this.at++]!;
  }
  u16(): number {
    this.need(2);
    const v = this.b.readUInt16BE(this.at);
    this.at += 2;
    return v;
  }
  u24(): number {
    this.need(3);
    const v = this.b.readUIntBE(this.at, 3);
    this.at += 3;
    return v;
  }
  bytes(n: number): Buffer {
    this.need(n);
    const v = this.b.subarray(this.at, this.at + n);
    this.at += n;
    return v;
  }
  /** A sub-reader over the next `n` bytes. */
  sub(n: number): Reader {
    this.need(n);
    const r = new Reader(this.b, this.at, this.at + n);
    this.at += n;
    return r;
  }
  get left(): number {
    return this.end - this.at;
  }
}

/** The SNI name and ALPN list of the ClientHello in the first TLS record of `bytes`. */
export function parseClientHello(bytes: Buffer): ClientHelloInfo | undefined {
  try {
    const record = new Reader(bytes, 0, bytes.length);
    if (record.u8() !== 0x16) return undefined;
    record.u16(); // legacy record version
    const body = record.sub(record.u16());
    if (body.u8() !== 1) return undefined; // client_hello
    const hello = body.sub(body.u24());
    hello.u16(); // legacy_version
    hello.bytes(32); // random
    hello.bytes(hello.u8()); // legacy_session_id
    hello.bytes(hello.u16()); // cipher_suites
    hello.bytes(hello.u8()); // legacy_compression_methods
    const info: ClientHelloInfo = { servername: undefined, alpn: [] };
    if (hello.left === 0) return info;
    const exts = hello.sub(hello.u16());
    while (exts.left > 0) {
      const type = exts.u16();
      const data = exts.sub(exts.u16());
      if (type === EXT_SERVER_NAME) {
        const list = data.sub(data.u16());
        while (list.left > 0) {
          const nameType = list.u8();
          const name = list.bytes(list.u16());
          if (nameType === 0) info.servername = name.toString('latin1').toLowerCase();
        }
      } else if (type === EXT_ALPN) {
        const list = data.sub(data.u16());
        while (list.left > 0) info.alpn.push(list.bytes(list.u8()).toString('latin1'));
      }
    }
    return info;
  } catch (err) {
    if (err instanceof RangeError) return undefined;
    throw err;
  }
}
