#!/usr/bin/env bash
# Tree pin benchmark (numbers go in bench/README.md, section "pintree"):
# fetch, verify and unpack a source tree packed as tar.gz (about SIZE_MIB MiB
# unpacked, text files like a real source tree) from nginx on loopback:
#
#   peer:  curl -o F URL && sha256sum F && tar -xzf F -C D
#   ours:  pinfetch --url URL --tree-sha256 SRI --output D   (the tree pin:
#          safe unpacking with libarchive and the NAR hash of the tree)
#          and with --sha256 too (both pins checked)
#
# The same tree in two entry orders: as forges serve archives (sorted by name,
# `tar --sort=name`, so pinfetch hashes it while unpacking) and in the file
# system's order (pinfetch hashes the unpacked tree afterwards). Each is
# timed against the peer on the same archive.
#
# Target: ours / peer <= 0.8 by mean wall time for the forge order. Everything
# is on tmpfs (/dev/shm) so the disk does not decide the result. Prints the
# load average, since the machine is shared.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/loopback-nginx.sh

SIZE_MIB=${SIZE_MIB:-200}
RUNS=${RUNS:-5}
PINFETCH=${PINFETCH:-build/pinfetch}
for t in nginx curl sha256sum tar gzip hyperfine; do
	command -v "$t" >/dev/null || { echo "bench/pintree.sh: $t is missing (make deps)" >&2; exit 1; }
done
[ -x "$PINFETCH" ] || { echo "bench/pintree.sh: $PINFETCH missing: make tools" >&2; exit 1; }
PINFETCH=$(realpath "$PINFETCH")

SHM=$(mktemp -d /dev/shm/pintree-bench.XXXXXX)
NGINX_PID=
cleanup() {
	[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null || true
	rm -rf "$SHM"
}
trap cleanup EXIT
chmod 0755 "$SHM"
mkdir -p "$SHM/www" "$SHM/out" "$SHM/src/project-1.0"

# A source tree: copies of the host's C headers and Python sources (text that
# compresses like code), in numbered subtrees, until SIZE_MIB is reached.
/usr/bin/python3 - "$SHM/src/project-1.0" "$SIZE_MIB" <<'PY'
import os, pathlib, shutil, sys
dest, want = pathlib.Path(sys.argv[1]), int(sys.argv[2]) << 20
files = [p for root in ("/usr/include", "/usr/lib/python3") for p in pathlib.Path(root).rglob("*")
         if p.is_file() and not p.is_symlink() and p.suffix in (".h", ".py", ".c", ".txt") and p.stat().st_size < 1 << 20]
total, i = 0, 0
while total < want:
    for p in files:
        if total >= want:
            break
        rel = p.relative_to("/")
        out = dest / f"copy{i}" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, out)
        if p.suffix == ".py" and p.name.startswith("_"):
            os.chmod(out, 0o755)
        total += p.stat().st_size
    i += 1
PY
tar -C "$SHM/src" --sort=name -czf "$SHM/www/forge.tar.gz" project-1.0
tar -C "$SHM/src" -czf "$SHM/www/fs.tar.gz" project-1.0
TREE=$("$PINFETCH" --hash-tree "$SHM/src/project-1.0" | cut -d' ' -f1)
FILES=$(find "$SHM/src" -type f | wc -l)
UNPACKED=$(du -sm --apparent-size "$SHM/src" | cut -f1)
PACKED=$(( $(stat -c %s "$SHM/www/forge.tar.gz") >> 20 ))
rm -rf "$SHM/src"
start_loopback_nginx "$SHM" "$SHM/www" forge.tar.gz
O=$SHM/out
# Which way each order is hashed, as pinfetch --verbose says.
for order in forge fs; do
	"$PINFETCH" --verbose --no-cache --url "http://127.0.0.1:$PORT/$order.tar.gz" --tree-sha256 "$TREE" \
		--output "$O/check" 2>&1 | sed -n "s|^.*: tree hashed|$order order: tree hashed|p"
	rm -rf "$O/check"
done

echo "pintree bench: a ${UNPACKED} MiB source tree ($FILES files), ${PACKED} MiB as tar.gz, over loopback from nginx, $RUNS runs each, $(nproc) cores"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
args=()
for order in forge fs; do
	URL="http://127.0.0.1:$PORT/$order.tar.gz"
	SHA=$(sha256sum "$SHM/www/$order.tar.gz" | cut -d' ' -f1)
	args+=(-n "$order: curl -o F && sha256sum F && tar -xzf F"
	       "curl -sS -o $O/peer.tgz $URL && sha256sum $O/peer.tgz > /dev/null && mkdir $O/peer && tar -xzf $O/peer.tgz -C $O/peer"
	       -n "$order: pinfetch --tree-sha256" "$PINFETCH --quiet --no-cache --url $URL --tree-sha256 $TREE --output $O/ours"
	       -n "$order: pinfetch --tree-sha256 --sha256"
	       "$PINFETCH --quiet --no-cache --url $URL --tree-sha256 $TREE --sha256 $SHA --output $O/both")
done
hyperfine --style basic --warmup 1 --runs "$RUNS" --export-json "$SHM/tree.json" \
	--prepare "rm -rf $O/peer $O/peer.tgz $O/ours $O/both" "${args[@]}" >&2
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

/usr/bin/python3 - "$SHM/tree.json" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
print(f"{'command':46} {'mean s':>7} {'min s':>7} {'ratio(mean)':>11} {'ratio(min)':>10} {'cpu s':>6}")
for name, r in res.items():
    peer = res[name.split(":")[0] + ": curl -o F && sha256sum F && tar -xzf F"]
    print(f"{name:46} {r['mean']:7.3f} {r['min']:7.3f} {r['mean'] / peer['mean']:11.2f} {r['min'] / peer['min']:10.2f}"
          f" {r['user'] + r['system']:6.2f}")
for order, label in (("forge", "forge order (sorted, the target)"), ("fs", "file system order")):
    peer, mine = res[f"{order}: curl -o F && sha256sum F && tar -xzf F"], res[f"{order}: pinfetch --tree-sha256"]
    ratio = mine["mean"] / peer["mean"]
    verdict = f" (target <= 0.80: {'OK' if ratio <= 0.8 else 'MISSED'})" if order == "forge" else ""
    print(f"{label}: pinfetch/(curl -o, sha256sum, tar -xzf): {ratio:.2f} by mean, "
          f"{mine['min'] / peer['min']:.2f} by min{verdict}")
PY
