# Sourced by shell tests (sh_test): named checks, counted as test cases.
#   ok NAME | bad NAME DETAIL ... ; finish   (exits non-zero if any check failed)
#   skip NAME WHY ...   a check that could not run here: counted as skipped, not passed
# Writes JUnit XML to $XML_OUTPUT_FILE (set by Bazel) so that each check counts as one
# test case in tests/run's closing line.
_shtest_cases=()
_shtest_failed=0
_shtest_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' <<<"$1" | tr -d '\000-\010\013\014\016-\037'; }
ok() { echo "ok   $1"; _shtest_cases+=("<testcase name=\"$(_shtest_escape "$1")\"/>"); }
bad() {
  local name=$1; shift
  echo "FAIL $name: $*"
  _shtest_failed=1
  _shtest_cases+=("<testcase name=\"$(_shtest_escape "$name")\"><failure message=\"$(_shtest_escape "$*" | head -c 2000)\"/></testcase>")
}
skip() {
  local name=$1; shift
  echo "SKIP $name: $*"
  _shtest_cases+=("<testcase name=\"$(_shtest_escape "$name")\" status=\"notrun\" result=\"skipped\"><skipped message=\"$(_shtest_escape "$*" | head -c 2000)\"/></testcase>")
}
finish() {
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuites><testsuite name=\"${TEST_TARGET:-shtest}\" tests=\"${#_shtest_cases[@]}\">"
      printf '%s\n' "${_shtest_cases[@]}"
      echo '</testsuite></testsuites>'
    } >"$XML_OUTPUT_FILE"
  fi
  exit $_shtest_failed
}
