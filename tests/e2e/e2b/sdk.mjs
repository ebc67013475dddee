// The stock E2B SDK against `gantry serve -listen`, unmodified: E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY say where and with what. Each step prints
// one JSON line {step, ...}; a failure prints {step, error} and exits 1.
// tests/e2e/test_api_e2b.py reads the lines.
import { Sandbox, CommandExitError } from "e2b";
import { randomBytes, createHash } from "node:crypto";

const out = (o) => console.log(JSON.stringify(o));
let step = "start";

try {
  step = "create";
  const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { purpose: "test" },
                                     envs: { GREETING: "hello from e2b" } });
  out({ step, id: sbx.sandboxId });

  step = "run";
  const r = await sbx.commands.run('echo "$GREETING"; echo to-stderr >&2; uname -s');
  out({ step, exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr });

  step = "exit";
  try {
    await sbx.commands.run("exit 3");
    out({ step, error: "no CommandExitError" });
  } catch (e) {
    out({ step, exitCode: e instanceof CommandExitError ? e.exitCode : null,
          kind: e.constructor.name });
  }

  step = "background";
  const bg = await sbx.commands.run("sleep 600", { background: true });
  const listed = (await sbx.commands.list()).map((p) => p.pid);
  const killed = await bg.kill();
  let waitError = null;
  try { await bg.wait(); } catch (e) { waitError = e.constructor.name; }
  const after = (await sbx.commands.list()).map((p) => p.pid);
  out({ step, pid: bg.pid, listed, killed, waitError, after });

  step = "stdin";
  const cat = await sbx.commands.run("cat", { background: true, stdin: true });
  await sbx.commands.sendStdin(cat.pid, "fed through stdin\n");
  await sbx.commands.closeStdin(cat.pid);
  const fed = await cat.wait();
  out({ step, stdout: fed.stdout, exitCode: fed.exitCode });

  step = "reconnect";
  const late = await sbx.commands.run("sleep 2; echo late; exit 4", { background: true });
  await late.disconnect();
  const followed = await sbx.commands.connect(late.pid);
  let lateExit = null;
  try { await followed.wait(); } catch (e) { lateExit = e.exitCode; }
  out({ step, stdout: followed.stdout, exitCode: lateExit });

  step = "pty";
  let screen = "";
  const term = await sbx.pty.create({ cols: 100, rows: 30,
                                      onData: (d) => { screen += new TextDecoder().decode(d); } });
  const until = async (text) => {
    for (let i = 0; i < 100 && !screen.includes(text); i++)
      await new Promise((r) => setTimeout(r, 100));
    return screen.includes(text);
  };
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size\n"));
  const first = await until("30 100");
  await sbx.pty.resize(term.pid, { cols: 120, rows: 40 });
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size; exit 5\n"));
  let ptyExit = null;
  try { await term.wait(); } catch (e) { ptyExit = e.exitCode; }
  out({ step, first, resized: screen.includes("40 120"), exitCode: ptyExit });

  // The files and the file system need nothing of the image: gantry's own
  // helper serves them, so take away the tools a command would have used.
  step = "no-tools";
  const gone = await sbx.commands.run(
    'for c in cat stat find mkdir rm mv dirname; do busybox rm -f "$(busybox which $c)"; done; ' +
    'busybox which cat stat find mkdir rm mv dirname || echo none');
  out({ step, stdout: gone.stdout });

  step = "files";
  const data = randomBytes(4 << 20);
  const sha = (b) => createHash("sha256").update(b).digest("hex");
  await sbx.files.write("/tmp/e2b/blob.bin", data.buffer.slice(data.byteOffset,
                                                               data.byteOffset + data.length));
  const back = Buffer.from(await sbx.files.read("/tmp/e2b/blob.bin", { format: "bytes" }));
  await sbx.files.write("/tmp/e2b/note.txt", "a note\n");
  const entries = (await sbx.files.list("/tmp/e2b")).map((e) => [e.name, e.type, e.size]);
  const exists = [await sbx.files.exists("/tmp/e2b/note.txt"),
                  await sbx.files.exists("/tmp/e2b/none")];
  out({ step, wrote: sha(data), read: sha(back), length: back.length, entries, exists,
        text: await sbx.files.read("/tmp/e2b/note.txt") });

  step = "fs";
  const made = await sbx.files.makeDir("/tmp/e2b/sub");
  const madeAgain = await sbx.files.makeDir("/tmp/e2b/sub");
  const moved = await sbx.files.rename("/tmp/e2b/note.txt", "/tmp/e2b/sub/moved.txt");
  const got = await sbx.files.getInfo("/tmp/e2b/sub/moved.txt");
  await sbx.files.remove("/tmp/e2b/sub");
  out({ step, made, madeAgain, moved: moved.path, size: got.size, type: got.type,
        gone: await sbx.files.exists("/tmp/e2b/sub") });

  step = "watch";
  await sbx.files.makeDir("/tmp/watched");
  const changes = [];
  const watcher = await sbx.files.watchDir("/tmp/watched", (e) => changes.push([e.name, e.type]));
  await sbx.files.write("/tmp/watched/new.txt", "x");
  for (let i = 0; i < 100 && !changes.some(([n]) => n === "new.txt"); i++)
    await new Promise((r) => setTimeout(r, 100));
  await watcher.stop();
  out({ step, changes });

  step = "connect";
  const joined = await Sandbox.connect(sbx.sandboxId);
  out({ step, stdout: (await joined.commands.run("echo connected")).stdout });

  step = "pause";
  // Refused while a process started through envd runs: a restore would cut it.
  const held = await sbx.commands.run("sleep 60", { background: true });
  let refused = null;
  try { await sbx.pause(); } catch (e) { refused = String(e.message || e); }
  await held.kill();
  try { await held.wait(); } catch (e) { /* killed: its session is over */ }
  // A counter only in a shell's memory, not an envd session: a pause saves
  // the VM, and the resume goes on from there.
  await sbx.commands.run("sh -c 'i=0; while :; do i=$((i+1)); echo $i >/tmp/count; " +
                         "sleep 0.1; done >/dev/null 2>&1 </dev/null &'");
  await new Promise((r) => setTimeout(r, 1000));
  const counted = Number((await sbx.commands.run("cat /tmp/count")).stdout);
  const paused = await sbx.pause();
  const pausedAgain = await Sandbox.pause(sbx.sandboxId);
  const listedPaused = (await Sandbox.list({ query: { state: ["paused"] } }).nextItems())
    .map((s) => s.sandboxId);
  const resumed = await Sandbox.connect(sbx.sandboxId);
  const restored = Number((await resumed.commands.run("cat /tmp/count")).stdout);
  await new Promise((r) => setTimeout(r, 500));
  const later = Number((await resumed.commands.run("cat /tmp/count")).stdout);
  out({ step, refused, paused, pausedAgain, listedPaused, counted, restored, later,
        running: await resumed.isRunning() });

  step = "snapshot";
  // Saved live: the source runs on; a sandbox made from the snapshot has
  // its file and its counter's memory; the snapshot is listed, then gone.
  await resumed.files.write("/tmp/snapped.txt", "from the snapshot\n");
  const snap = await resumed.createSnapshot();
  const snapsListed = (await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems())
    .map((s) => s.snapshotId);
  const clone = await Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 });
  const cloned = (await clone.commands.run("cat /tmp/snapped.txt")).stdout;
  const cloneCount = Number((await clone.commands.run("cat /tmp/count")).stdout);
  await clone.kill();
  const deleted = await Sandbox.deleteSnapshot(snap.snapshotId);
  const deletedAgain = await Sandbox.deleteSnapshot(snap.snapshotId);
  out({ step, snapshotId: snap.snapshotId, names: snap.names, listed: snapsListed, cloned,
        cloneCount, deleted, deletedAgain, running: await resumed.isRunning() });

  step = "fork";
  // One live snapshot, two sandboxes from it, each under its own name.
  const forks = await Sandbox.fork(sbx.sandboxId, { count: 2, timeoutMs: 60_000 });
  const forkOut = [];
  for (const f of forks)
    forkOut.push(f instanceof Error ? String(f)
                                    : (await f.commands.run("cat /tmp/snapped.txt; hostname")).stdout);
  const forkIds = forks.filter((f) => !(f instanceof Error)).map((f) => f.sandboxId);
  for (const f of forks)
    if (!(f instanceof Error)) await f.kill();
  const forkSnaps = (await Sandbox.listSnapshots().nextItems()).length;
  out({ step, forkOut, forkIds, forkSnaps, running: await resumed.isRunning() });

  step = "second";
  const other = await Sandbox.create({ timeoutMs: 60_000 });
  const r2 = await other.commands.run("echo second");
  const ids = (await Sandbox.list().nextItems()).map((s) => s.sandboxId).sort();
  await other.kill();
  out({ step, stdout: r2.stdout, ids });

  step = "timeout";
  await sbx.setTimeout(30_000);
  const info = await sbx.getInfo();
  out({ step, endAt: info.endAt, metadata: info.metadata, running: await sbx.isRunning() });

  step = "kill";
  const ok = await sbx.kill();
  const again = await Sandbox.kill(sbx.sandboxId);
  out({ step, ok, again });
} catch (e) {
  out({ step, error: String(e && e.stack ? e.stack : e) });
  process.exit(1);
}
