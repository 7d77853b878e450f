// Preloaded (node --import) into every process the stack supervisor starts. The supervisor holds
// an IPC channel to each child; when the supervisor dies in any way, even by SIGKILL, the channel
// closes and the child stops itself as if it had been sent SIGTERM. Children run in their own
// process group (a terminal's Ctrl-C reaches only the supervisor), so without this a killed
// supervisor would leave orphans. Plain JavaScript: it runs before tsx is registered.
const GRACE_MS = 10_000

function stopSelf () {
  process.kill(process.pid, 'SIGTERM')
  setTimeout(() => process.exit(1), GRACE_MS).unref()
}

// process.send exists in any child started with an IPC channel; PD_STACK_CHILD (child.ts) says the
// channel is the supervisor's. It is removed at once: node-llama-cpp forks a test process with our
// --import and its own IPC channel, and that one must not unref its channel or stop with ours.
const mine = process.env.PD_STACK_CHILD === '1'
delete process.env.PD_STACK_CHILD
if (mine && typeof process.send === 'function') {
  if (!process.connected) {
    // The supervisor died while this process was still starting: the channel is closed already.
    stopSelf()
  }
  else {
    // The channel must not keep a child alive that has finished on its own.
    process.channel?.unref()
    process.once('disconnect', stopSelf)
  }
}
