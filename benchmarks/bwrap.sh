# Sourced by the GPU scripts whose tools run in the sandbox (run_python): puts bubblewrap on PATH when the
# GPU image lacks it, from Debian .debs carried in BWRAP_DEBS (default .bwrap), made once on the CPU machine:
#   mkdir -p .bwrap && (cd .bwrap && apt-get download bubblewrap libcap2 libselinux1)
# The .debs are unpacked under /tmp/bwrap, never into /. Then `bwrap_probe ENV LOG` runs one run_python
# call of the environment ENV and fails, with the reason in LOG, where the sandbox cannot run (no user
# namespaces under some container runtimes): nothing trains without a working sandbox.
if ! command -v bwrap >/dev/null; then
  debs=${BWRAP_DEBS:-.bwrap}
  ls "$debs"/bubblewrap_*.deb >/dev/null 2>&1 || { echo "no bwrap here and no $debs/bubblewrap_*.deb carried" >&2; exit 3; }
  rm -rf /tmp/bwrap && mkdir -p /tmp/bwrap/bin
  for deb in "$debs"/*.deb; do dpkg -x "$deb" /tmp/bwrap; done
  chmod -R a+rX /tmp/bwrap  # the sandbox starts bwrap as nobody when run as root
  if ldd /tmp/bwrap/usr/bin/bwrap | grep -q "not found"; then  # the image lacks libcap2/libselinux1
    printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/bwrap/lib/x86_64-linux-gnu exec /tmp/bwrap/usr/bin/bwrap "$@"\n' \
      > /tmp/bwrap/bin/bwrap
    chmod 755 /tmp/bwrap/bin/bwrap
  else
    ln -sf /tmp/bwrap/usr/bin/bwrap /tmp/bwrap/bin/bwrap
  fi
  export PATH="/tmp/bwrap/bin:$PATH"
fi

bwrap_probe() {  # ENV LOG: one run_python call through ENV's tools; non-zero (and LOG says why) if it fails
  { uname -a; bwrap --version; command -v setpriv prlimit; } > "$2" 2>&1 || true
  if ! python3 -m swift_rlfactory.cli tools call "$1" run_python '{"code": "print(6 * 7)"}' >> "$2" 2>&1; then
    echo "run_python cannot run on this machine; see $2:" >&2
    tail -5 "$2" >&2
    return 3
  fi
}
