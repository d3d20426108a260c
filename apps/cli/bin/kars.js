#!/usr/bin/env node
// Entry point: all work happens in main(); importing the module does nothing.
import { main } from '../dist/main.js';

main(process.argv).then(
  (code) => {
    if (typeof code === 'number') process.exitCode = code;
  },
  (err) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  },
);
