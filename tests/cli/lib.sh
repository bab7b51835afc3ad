# What every CLI test script starts with (sourced): a private temporary
# directory, removed however the script ends, and fail MESSAGE (exit 1).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
