// Draws Cohort's icons (three peers joined in a ring) as PNGs into assets/. Run after changing the design:
// `node scripts/make-icons.mjs`. Pure Node (zlib) so it needs no image tools.
import fs from 'node:fs';
import zlib from 'node:zlib';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
const crc32 = (buf) => buf.reduce((c, b) => CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8), 0xffffffff) ^ 0xffffffff;

function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)) >>> 0, 8 + data.length);
  return out;
}

function png(size, pixel) {
  const raw = Buffer.alloc(size * (size * 4 + 1));
  for (let y = 0; y < size; y++) {
    raw[y * (size * 4 + 1)] = 0; // filter: none
    for (let x = 0; x < size; x++) {
      const [r, g, b, a] = pixel((x + 0.5) / size, (y + 0.5) / size);
      raw.set([r, g, b, a], y * (size * 4 + 1) + 1 + x * 4);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(size, 0);
  ihdr.writeUInt32BE(size, 4);
  ihdr.set([8, 6, 0, 0, 0], 8); // 8-bit RGBA
  return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr), chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

const PEERS = [0, 1, 2].map((i) => [0.5 + 0.27 * Math.sin((i * 2 * Math.PI) / 3), 0.52 - 0.27 * Math.cos((i * 2 * Math.PI) / 3)]);
const smooth = (d, edge) => Math.max(0, Math.min(1, 0.5 - d / edge));

function draw(color, background) {
  return (size) => (x, y) => {
    const edge = 1.5 / size;
    const ring = Math.abs(Math.hypot(x - 0.5, y - 0.52) - 0.27) - 0.035;
    const dot = Math.min(...PEERS.map(([px, py]) => Math.hypot(x - px, y - py) - 0.1));
    const ink = smooth(Math.min(ring, dot), edge);
    if (!background) return [...color, Math.round(255 * ink)];
    const corner = Math.max(Math.abs(x - 0.5) - 0.38, Math.abs(y - 0.5) - 0.38);
    const inside = smooth(corner > 0 ? Math.hypot(Math.max(Math.abs(x - 0.5) - 0.38, 0), Math.max(Math.abs(y - 0.5) - 0.38, 0)) - 0.1 : corner - 0.1, edge);
    const mix = (a, b) => Math.round(a * (1 - ink) + b * ink);
    return [mix(background[0], color[0]), mix(background[1], color[1]), mix(background[2], color[2]), Math.round(255 * inside)];
  };
}

fs.mkdirSync('assets', { recursive: true });
const icon = draw([255, 255, 255], [37, 99, 235]);
const tray = draw([32, 32, 32]);
const trayPaused = draw([140, 140, 140]);
for (const [file, size, paint] of [
  ['icon.png', 512, icon],
  ['tray.png', 16, tray],
  ['tray@2x.png', 32, tray],
  ['tray-paused.png', 16, trayPaused],
  ['tray-paused@2x.png', 32, trayPaused],
]) {
  fs.writeFileSync(`assets/${file}`, png(size, paint(size)));
}
console.log('wrote assets/icon.png and tray icons');
