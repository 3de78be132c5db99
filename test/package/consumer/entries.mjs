// A consumer's program importing each entry named in argv ("turnstream", "turnstream/runner", …) from
// the installed package. Prints each entry's run-time names as one JSON object.
const names = {};
for (const specifier of process.argv.slice(2)) names[specifier] = Object.keys(await import(specifier)).sort();
process.stdout.write(JSON.stringify(names) + "\n");
