/**
 * A replica contending for leadership in a process of its own (test/db/leader.test.ts), so a test can kill
 * a leader for real (SIGKILL: no cleanup, no goodbye to the server). argv[2]: JSON { url, key, pollMs, leaseMs }.
 * Prints one line per event: "contending", "elected", "lost <reason>".
 */
import { Leadership } from "../../server/db/leader";

const options = JSON.parse(process.argv[2]) as { url: string; key: string; pollMs: number; leaseMs: number };
const leadership = new Leadership({
  ...options,
  applicationName: "leader-child",
  onElected: () => process.stdout.write("elected\n"),
  onLost: (reason) => process.stdout.write(`lost ${reason.message}\n`),
});
void leadership.start().then(() => process.stdout.write("contending\n"));
