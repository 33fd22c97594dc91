/**
 * The secure frame encoding for cache requests (docs/protocol.md, "Secure frames").
 *
 * Handshake: HELLO carries the client's ephemeral X25519 public key, HELLO_OK the
 * agent's; both sides derive one key per direction with crypto_kx. Every SEALED
 * frame then carries an explicit 64-bit counter and a ChaCha20-Poly1305 (IETF)
 * ciphertext of the inner frame (type byte + payload). The nonce is the counter;
 * the AEAD's associated data is the SEALED frame header plus the counter, so a
 * frame cannot be altered, replayed, reordered or cut without detection.
 * Plaintexts and keys live only in sodium_malloc memory, taken from the
 * process's secure pool (native/secure-pool.ts) and zeroed when given back:
 * nothing here allocates guarded memory per handshake or per message.
 */
import { keySlots } from '../native/key-slots.js';
import { securePool } from '../native/secure-pool.js';
import { loadSodium } from '../native/sodium.js';
import { ProtocolError } from './errors.js';
import { HEADER_BYTES, MAGIC, MAX_PAYLOAD_BYTES, type Frame } from './frame.js';
import { MsgType } from './messages.js';

const sodium = loadSodium();

const ABYTES = sodium.crypto_aead_chacha20poly1305_ietf_ABYTES;
const NPUBBYTES = sodium.crypto_aead_chacha20poly1305_ietf_NPUBBYTES;
const COUNTER_BYTES = 8;

/**
 * Zeroes a buffer: a key slot (native/key-slots.ts) or a secure pool view
 * (native/secure-pool.ts) is given back, a sodium_malloc buffer freed; safe
 * to call on any buffer, and twice.
 */
export function wipe(buf: Buffer | null | undefined): void {
  if (!buf || keySlots.release(buf) || securePool.release(buf)) return;
  sodium.sodium_memzero(buf);
  if ((buf as Buffer & { secure?: boolean }).secure) sodium.sodium_free(buf);
}

/** An ephemeral key pair, secret half in secure memory (a pool view: wipe() it). */
export interface EphemeralKeys {
  publicKey: Buffer;
  secretKey: Buffer;
}

export function ephemeralKeys(): EphemeralKeys {
  const publicKey = Buffer.alloc(sodium.crypto_kx_PUBLICKEYBYTES);
  const secretKey = securePool.take(sodium.crypto_kx_SECRETKEYBYTES);
  sodium.crypto_kx_keypair(publicKey, secretKey);
  return { publicKey, secretKey };
}

function checkPeerKey(pk: Buffer): void {
  if (pk.length !== sodium.crypto_kx_PUBLICKEYBYTES)
    throw new ProtocolError('MALFORMED_PAYLOAD', 'handshake public key has the wrong length');
  if (pk.every((b) => b === 0)) throw new ProtocolError('MALFORMED_PAYLOAD', 'handshake public key is all zero');
}

/**
 * Size of a channel's reusable scratch buffers. Cache requests and replies
 * (ids, keys, short paths, list pages of a few entries) fit; a rarer larger
 * message gets a larger buffer from the secure pool, up to the 128 KiB frame cap.
 */
export const SCRATCH_BYTES = 4096;

/**
 * One reusable buffer of secure memory, lent out one view at a time, so that
 * a message costs a memzero rather than a trip to the secure pool. A view must
 * be given back with give(), which zeroes it; while the scratch is lent, or
 * for a request larger than it, take() falls back to a buffer of its own from
 * the secure pool (given back, zeroed, by give()). The scratch's own buffer
 * goes back to the pool on destroy().
 */
export class SecureScratch {
  /** The pool view behind the scratch, from the first take() to destroy(). */
  private buf: Buffer | null = null;
  private lent = false;
  private destroyed = false;

  constructor(readonly capacity = SCRATCH_BYTES) {}

  /** A zero-filled secure buffer of `size` bytes; hand it back with give(). */
  take(size: number): Buffer {
    if (this.lent || this.destroyed || size > this.capacity) return securePool.take(size);
    this.buf ??= securePool.take(this.capacity);
    this.lent = true;
    return this.buf.subarray(0, size);
  }

  /** Zeroes a buffer from take(); a fallback goes back to the pool. Safe to call twice, and after destroy(). */
  give(view: Buffer): void {
    // A fallback is a view the pool handed out; the scratch's own views are subarrays it does not know.
    if (securePool.release(view)) return;
    // Ours: zero it. After destroy(), or given back twice, there is nothing of ours to zero
    // (the buffer may already belong to someone else).
    if (this.buf !== null && view.buffer === this.buf.buffer) {
      sodium.sodium_memzero(view);
      this.lent = false;
    }
  }

  /**
   * What the scratch holds now, for tests: 'unused' (never allocated), 'lent',
   * 'zero' (allocated, idle and all zero), 'dirty' (idle but not all zero: a bug),
   * or 'freed' (after destroy()).
   */
  state(): 'unused' | 'lent' | 'zero' | 'dirty' | 'freed' {
    if (this.destroyed) return 'freed';
    if (this.buf === null) return 'unused';
    if (this.lent) return 'lent';
    return this.buf.every((b) => b === 0) ? 'zero' : 'dirty';
  }

  /** Zeroes the scratch and gives it back to the pool; later take() calls get buffers of their own. */
  destroy(): void {
    this.destroyed = true;
    if (this.buf === null) return;
    securePool.release(this.buf);
    this.buf = null;
    this.lent = false;
  }
}

/** An opened SEALED frame: the inner frame's payload lives in secure memory until release(). */
export interface OpenedFrame {
  inner: Frame;
  release(): void;
}

/** The SEALED header and counter: the associated data of every sealed frame. */
const AD_BYTES = HEADER_BYTES + COUNTER_BYTES;

export class SecureChannel {
  private sendCounter = 0n;
  private recvCounter = 0n;
  private destroyed = false;
  /** Plaintext of the frame being sealed (only during seal()). */
  private readonly sealScratch = new SecureScratch();
  /** Plaintext of the last opened frame, until its release(). */
  private readonly openScratch = new SecureScratch();
  private readonly nonce = Buffer.alloc(NPUBBYTES);
  private readonly ad = Buffer.alloc(AD_BYTES);

  private constructor(
    private readonly rx: Buffer,
    private readonly tx: Buffer,
  ) {}

  /** Agent side: derive keys from our ephemeral pair and the client's public key. Wipes our secret key. */
  static forServer(ours: EphemeralKeys, clientPublicKey: Buffer): SecureChannel {
    const rx = securePool.take(sodium.crypto_kx_SESSIONKEYBYTES);
    const tx = securePool.take(sodium.crypto_kx_SESSIONKEYBYTES);
    try {
      // Inside the try: a refused peer key still wipes our secret key and the session buffers.
      checkPeerKey(clientPublicKey);
      sodium.crypto_kx_server_session_keys(rx, tx, ours.publicKey, ours.secretKey, clientPublicKey);
    } catch (err) {
      wipe(rx);
      wipe(tx);
      throw err instanceof ProtocolError
        ? err
        : new ProtocolError('MALFORMED_PAYLOAD', 'handshake public key was rejected');
    } finally {
      wipe(ours.secretKey);
    }
    return new SecureChannel(rx, tx);
  }

  /** Client side: derive keys from our ephemeral pair and the agent's public key. Wipes our secret key. */
  static forClient(ours: EphemeralKeys, serverPublicKey: Buffer): SecureChannel {
    const rx = securePool.take(sodium.crypto_kx_SESSIONKEYBYTES);
    const tx = securePool.take(sodium.crypto_kx_SESSIONKEYBYTES);
    try {
      // Inside the try: a refused peer key still wipes our secret key and the session buffers.
      checkPeerKey(serverPublicKey);
      sodium.crypto_kx_client_session_keys(rx, tx, ours.publicKey, ours.secretKey, serverPublicKey);
    } catch (err) {
      wipe(rx);
      wipe(tx);
      throw err instanceof ProtocolError
        ? err
        : new ProtocolError('MALFORMED_PAYLOAD', 'agent handshake public key was rejected');
    } finally {
      wipe(ours.secretKey);
    }
    return new SecureChannel(rx, tx);
  }

  /**
   * Seals an inner frame into a SEALED frame (returned as one wire buffer).
   * The inner payload is copied into secure memory for encryption; the caller
   * still owns (and should wipe) the payload it passed.
   */
  seal(inner: Frame): Buffer {
    return this.sealEncoded((alloc) => {
      const payload = alloc(inner.payload.length);
      inner.payload.copy(payload);
      return { type: inner.type, payload };
    });
  }

  /**
   * Seals an inner frame that `encode` builds straight into the channel's
   * secure memory: it receives an allocator for the payload (call it once, as
   * encodeRequest/encodeReply do with theirs). Nothing of the payload outlives
   * this call: the plaintext is zeroed before it returns.
   */
  sealEncoded(encode: (alloc: (size: number) => Buffer) => Frame): Buffer {
    this.alive();
    let plain: Buffer | null = null;
    const alloc = (size: number): Buffer => {
      if (plain !== null) throw new ProtocolError('MALFORMED_PAYLOAD', 'sealEncoded: the payload was allocated twice');
      const sealedLength = COUNTER_BYTES + 1 + size + ABYTES;
      if (sealedLength > MAX_PAYLOAD_BYTES) {
        throw new ProtocolError(
          'INVALID_SIZE',
          `payload of ${sealedLength} bytes exceeds the ${MAX_PAYLOAD_BYTES}-byte limit`,
        );
      }
      plain = this.sealScratch.take(1 + size);
      return plain.subarray(1);
    };
    try {
      const inner = encode(alloc);
      const p: Buffer = plain ?? alloc(0);
      if (
        inner.payload.buffer !== p.buffer ||
        inner.payload.byteOffset !== p.byteOffset + 1 ||
        inner.payload.length !== p.length - 1
      ) {
        throw new ProtocolError('MALFORMED_PAYLOAD', 'sealEncoded: the payload was not built in the allocated buffer');
      }
      p[0] = inner.type;
      const payloadLength = COUNTER_BYTES + p.length + ABYTES;
      const out = Buffer.allocUnsafe(HEADER_BYTES + payloadLength);
      writeHeader(out, payloadLength);
      const counter = this.sendCounter;
      out.writeBigUInt64LE(counter, HEADER_BYTES);
      sodium.crypto_aead_chacha20poly1305_ietf_encrypt(
        out.subarray(AD_BYTES),
        p,
        out.subarray(0, AD_BYTES),
        null,
        this.nonceFor(counter),
        this.tx,
      );
      this.sendCounter = counter + 1n;
      return out;
    } finally {
      if (plain !== null) this.sealScratch.give(plain);
    }
  }

  /**
   * Opens a SEALED frame. The counter must be exactly the next expected one:
   * lower is a replay, higher means frames were dropped or reordered. A frame
   * that fails authentication changes nothing (the next genuine frame still opens).
   * The plaintext stays in the channel's secure scratch until release().
   */
  open(frame: Frame): OpenedFrame {
    this.alive();
    if (frame.type !== MsgType.SEALED) throw new ProtocolError('MALFORMED_FRAME', 'expected a sealed frame');
    if (frame.payload.length < COUNTER_BYTES + 1 + ABYTES)
      throw new ProtocolError('MALFORMED_PAYLOAD', 'sealed frame is too short');
    const counter = frame.payload.readBigUInt64LE(0);
    if (counter !== this.recvCounter) {
      const why = counter < this.recvCounter ? 'replayed' : 'out of order';
      throw new ProtocolError('OUT_OF_ORDER', `sealed frame ${why} (counter ${counter}, expected ${this.recvCounter})`);
    }
    if (frame.payload.length > MAX_PAYLOAD_BYTES) throw new ProtocolError('INVALID_SIZE', 'sealed frame is too long');
    writeHeader(this.ad, frame.payload.length);
    frame.payload.copy(this.ad, HEADER_BYTES, 0, COUNTER_BYTES);
    const cipher = frame.payload.subarray(COUNTER_BYTES);
    const plain = this.openScratch.take(cipher.length - ABYTES);
    try {
      sodium.crypto_aead_chacha20poly1305_ietf_decrypt(plain, null, cipher, this.ad, this.nonceFor(counter), this.rx);
    } catch {
      this.openScratch.give(plain);
      throw new ProtocolError(
        'DECRYPT_FAILED',
        'sealed frame failed authentication (tampered, or sealed with another key)',
      );
    }
    this.recvCounter = counter + 1n;
    let released = false;
    return {
      inner: { type: plain[0]!, payload: plain.subarray(1) },
      release: () => {
        if (!released) this.openScratch.give(plain);
        released = true;
      },
    };
  }

  /** The state of the channel's two secure scratch buffers (for tests: both 'zero' or 'unused' between messages, 'freed' after destroy()). */
  scratchState(): { seal: ReturnType<SecureScratch['state']>; open: ReturnType<SecureScratch['state']> } {
    return { seal: this.sealScratch.state(), open: this.openScratch.state() };
  }

  /** Zeroes both session keys and both scratch buffers and gives them back to the secure pool. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    wipe(this.rx);
    wipe(this.tx);
    this.sealScratch.destroy();
    this.openScratch.destroy();
  }

  private nonceFor(counter: bigint): Buffer {
    // Bytes 0-3 stay zero; the counter fills 4-11.
    this.nonce.writeBigUInt64LE(counter, NPUBBYTES - COUNTER_BYTES);
    return this.nonce;
  }

  private alive(): void {
    if (this.destroyed) throw new ProtocolError('NO_SESSION', 'secure channel is closed');
  }
}

/** The 9-byte SEALED frame header, written at the start of `out`. */
function writeHeader(out: Buffer, payloadLength: number): void {
  MAGIC.copy(out, 0);
  out[4] = MsgType.SEALED;
  out.writeUInt32LE(payloadLength, 5);
}
