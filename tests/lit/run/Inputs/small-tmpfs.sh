# Sourced by the disk-full tests: `small_tmpfs NAME DIR SIZE` mounts a
# tmpfs of SIZE on DIR, unmounted when the script exits. Where there is no
# root or mount(2) it prints "NAME: skipped" and ends the script, passing.
small_tmpfs() {
  local name=$1 dir=$2 size=$3
  mkdir -p "$dir"
  if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o "size=$size" tmpfs "$dir" 2>/dev/null; then
    echo "$name: skipped (needs root and a tmpfs mount)"
    exit 0
  fi
  trap "umount '$dir'" EXIT
}
