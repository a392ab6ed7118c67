#!/bin/bash
# run.sh COLABFS FSX OUT [MOUNT-OPTIONS]: real clients on a writable mount of an empty emulated Drive with uploads
# while open every second (xfstests fsx with mmap and close/open, git clone, tar x, sqlite3, rsync),
# then a fresh mount with an empty cache: diff -r, and every file's md5 against Drive's md5Checksum.
set -u
bin=$(readlink -f "$1"); fsx=$(readlink -f "$2"); out=$3; top=$(cd "$(dirname "$0")/../.." && pwd); rm -rf $out; mkdir -p $out/mnt $out/mnt2 $out/src
echo '{"items": []}' > $out/spec.json
/usr/bin/python3 $top/tests/emulator/drive_emulator.py --spec $out/spec.json --port 0 --port-file $out/port --access-token cl > $out/emu.out 2>&1 &
emu=$!
for i in $(seq 300); do [ -s $out/port ] && break; sleep 0.1; done
api=http://127.0.0.1:$(cat $out/port)
M="--api-url=$api --write-back-delay=0 --upload-open-files=1 ${4:-}"  # e.g. --recovery=forward (Colab's)
COLABFS_ACCESS_TOKEN=cl $bin mount $M --cache-dir=$out/cache --log-file=$out/c1.log $out/mnt || exit 1
mkdir $out/mnt/w
cd $out/mnt/w
for s in 1 2 3 4 5 6; do
  timeout 300 $fsx -q -c 20 -X -N 3000 -S $s -l 1000000 fsx$s > $out/fsx$s.log 2>&1; echo "fsx seed $s rc=$?"
done
# a repo, a tarball, sqlite, rsync
git -C $out/src init -q repo && (cd $out/src/repo && for i in $(seq 200); do mkdir -p d$((i%10)); head -c $((i*37)) /dev/urandom > d$((i%10))/f$i; done; git add -A; git -c user.email=a@b -c user.name=t commit -qm x)
timeout 300 git clone -q $out/src/repo $out/mnt/w/repo; echo "git clone rc=$?"
tar cf $out/src/t.tar -C $top src man; timeout 300 tar xf $out/src/t.tar -C $out/mnt/w; echo "tar x rc=$?"
timeout 300 sqlite3 $out/mnt/w/db.sqlite "create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c limit 20000) insert into t select x, randomblob(100) from c; update t set b=randomblob(50) where a%3=0; delete from t where a%7=0;"; echo "sqlite3 rc=$?"
sqlite3 $out/mnt/w/db.sqlite "pragma integrity_check; select count(*) from t"
timeout 300 rsync -a $top/python/ $out/mnt/w/rsync/; echo "rsync rc=$?"
cd /
$bin sync --timeout 600 --quiet $out/mnt; echo "sync rc=$?"
# local copies of what the first mount shows, then unmount
mkdir $out/shown && cp -a $out/mnt/w $out/shown/ ; $bin umount $out/mnt; echo "umount rc=$?"
COLABFS_ACCESS_TOKEN=cl $bin mount --api-url=$api --cache-dir=$out/cache2 --log-file=$out/c2.log $out/mnt2 || exit 1
diff -r $out/shown/w $out/mnt2/w > $out/diff.txt; echo "fresh mount diff rc=$? ($(wc -l < $out/diff.txt) lines)"
diff -r $out/src/repo $out/mnt2/w/repo -x .git >/dev/null; echo "repo vs source rc=$?"
sqlite3 $out/mnt2/w/db.sqlite "pragma integrity_check; select count(*) from t"
# every file's md5 against Drive's md5Checksum
/usr/bin/python3 - "$api" "$out/mnt2" <<'PY'
import hashlib, json, os, sys, urllib.request, urllib.parse
api, mnt = sys.argv[1], sys.argv[2]
def get(path):
    r = urllib.request.Request(api + path, headers={"Authorization": "Bearer cl"})
    return json.loads(urllib.request.urlopen(r).read())
n = bad = 0
def walk(fid, rel):
    global n, bad
    tok = None
    while True:
        q = {"q": "'%s' in parents and trashed = false" % fid, "pageSize": "1000",
             "fields": "nextPageToken,files(id,name,mimeType,md5Checksum,size)"}
        if tok: q["pageToken"] = tok
        j = get("/drive/v3/files?" + urllib.parse.urlencode(q))
        for f in j["files"]:
            p = os.path.join(rel, f["name"])
            if f["mimeType"] == "application/vnd.google-apps.folder":
                walk(f["id"], p); continue
            n += 1
            h = hashlib.md5(open(os.path.join(mnt, p), "rb").read()).hexdigest()
            if h != f.get("md5Checksum"):
                bad += 1; print("md5 differs:", p)
        tok = j.get("nextPageToken")
        if not tok: break
walk(get("/drive/v3/files/root?fields=id")["id"], "")
print("files compared with Drive's md5: %d, differing: %d" % (n, bad))
PY
grep -c "conflict" $out/c1.log
$bin umount $out/mnt2; kill $emu
