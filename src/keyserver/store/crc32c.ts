/**
 * CRC-32C (Castagnoli), the checksum of every store record. Node 20 has no
 * built-in CRC (zlib.crc32 arrived in Node 22 and is CRC-32/ISO-HDLC anyway);
 * CRC-32C detects all burst errors up to 32 bits and is what ext4, iSCSI and
 * LevelDB use for the same job. Slicing-by-8 keeps it well above disk speed.
 */

const POLY = 0x82f63b78;
const tables: Uint32Array[] = [];
{
  const t0 = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
    t0[i] = c >>> 0;
  }
  tables.push(t0);
  for (let s = 1; s < 8; s++) {
    const prev = tables[s - 1]!;
    const t = new Uint32Array(256);
    for (let i = 0; i < 256; i++) t[i] = (prev[i]! >>> 8) ^ t0[prev[i]! & 0xff]!;
    tables.push(t);
  }
}
const [T0, T1, T2, T3, T4, T5, T6, T7] = tables as [
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
  Uint32Array,
];

/** CRC-32C of `data`, continuing from `crc` (0 to start). */
export function crc32c(data: Uint8Array, crc = 0): number {
  let c = ~crc >>> 0;
  let i = 0;
  const n = data.length;
  for (; i + 8 <= n; i += 8) {
    c ^= data[i]! | (data[i + 1]! << 8) | (data[i + 2]! << 16) | (data[i + 3]! << 24);
    c =
      T7[c & 0xff]! ^
      T6[(c >>> 8) & 0xff]! ^
      T5[(c >>> 16) & 0xff]! ^
      T4[c >>> 24]! ^
      T3[data[i + 4]!]! ^
      T2[data[i + 5]!]! ^
      T1[data[i + 6]!]! ^
      T0[data[i + 7]!]!;
  }
  for (; i < n; i++) c = T0[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
