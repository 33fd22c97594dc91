#!/usr/bin/env node
// Demo "mail" command for `stash_key_server --verification-email-command`.
// Run as `demo-mail-confirm.js <email> <url>`: instead of mailing the link it
// confirms it (POST, like the button on the page), so `npm run demo` can show
// the whole publish -> confirm -> receive flow without a mail server.
// Refuses anything but a loopback URL: it is for demos and tests only.
import { request } from 'node:http';

const args = process.argv.slice(2);
if (args.length !== 2) {
  process.stderr.write('usage: demo-mail-confirm.js <email> <url>\n');
  process.exit(64);
}
const [email, link] = args;
let url;
try {
  url = new URL(link);
} catch {
  process.stderr.write('demo mail: not a URL\n');
  process.exit(65);
}
if (url.protocol !== 'http:' || !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
  process.stderr.write('demo mail: only http:// loopback links are confirmed automatically\n');
  process.exit(65);
}
const req = request(
  url,
  {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Content-Length': '0' },
    timeout: 5000,
  },
  (res) => {
    res.resume();
    res.on('end', () => {
      if (res.statusCode === 200) {
        process.stdout.write(`demo mail: confirmed the verification link for ${email}\n`);
        process.exit(0);
      }
      process.stderr.write(`demo mail: the server answered ${res.statusCode}\n`);
      process.exit(1);
    });
  },
);
req.on('timeout', () => req.destroy(new Error('timed out')));
req.on('error', (err) => {
  process.stderr.write(`demo mail: ${err.message}\n`);
  process.exit(1);
});
req.end();
