# Sourced by the scripts run on a lent GPU machine (gpu-check.sh, gpu-extra.sh, gpu-profile.sh,
# cpu-compare-on-gpu-host.sh), which has no Rust toolchain: `unpack_dlc_gpu` makes ./dlc-gpu
# from the binary carried compressed, dlc-gpu.xz (what gpu-check.sh says how to build) or
# dlc-gpu.gz, unless it is there already; it fails when neither was carried.
unpack_dlc_gpu() {
  [ -x ./dlc-gpu ] && return 0
  if [ -f ./dlc-gpu.xz ]; then
    xz -dc dlc-gpu.xz > dlc-gpu || return 1
  elif [ -f ./dlc-gpu.gz ]; then
    gunzip -c dlc-gpu.gz > dlc-gpu || return 1
  else
    return 1
  fi
  chmod +x dlc-gpu
}
