# find_python MODULES: sets py to the first of /usr/bin/python3 and python3 that
# imports MODULES (comma-separated, as `import` takes them); prints a SKIP line
# and returns 1 when none does.  Sourced by tests/gpu/run.sh and tests/python/run.sh.
find_python() {
	for py in /usr/bin/python3 python3; do
		if command -v "$py" >/dev/null 2>&1 && "$py" -c "import $1" 2>/dev/null; then
			return 0
		fi
	done
	py=""
	echo "SKIP: no python3 that imports $1 (apt-get install python3-pytest python3-numpy)"
	return 1
}
