// Validates Kubernetes objects offline against the OpenAPI schemas bundled in the npm package
// kubernetes-models (ajv). Input: a JSON array of objects on stdin. Output: one line per object;
// exit 1 when any object is invalid or of a kind the package does not know.
// Usage: NODE_PATH=<dir>/node_modules node validate_objects.js < objects.json
'use strict';

function modulePath(apiVersion, kind) {
  const slash = apiVersion.indexOf('/');
  if (slash < 0) return `kubernetes-models/${apiVersion}/${kind}`;  // core group: v1
  return `kubernetes-models/${apiVersion.slice(0, slash)}/${apiVersion.slice(slash + 1)}/${kind}`;
}

const objects = JSON.parse(require('fs').readFileSync(0, 'utf8'));
let failures = 0;
for (const obj of objects) {
  const name = `${obj.apiVersion} ${obj.kind} ${obj.metadata && obj.metadata.name}`;
  let Model;
  try {
    Model = require(modulePath(obj.apiVersion, obj.kind))[obj.kind];
  } catch (e) {
    console.log(`FAIL ${name}: no schema (${e.message.split('\n')[0]})`);
    failures++;
    continue;
  }
  try {
    new Model(obj).validate();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message}`);
    failures++;
  }
}
console.log(`${objects.length - failures}/${objects.length} objects valid`);
process.exit(failures === 0 && objects.length > 0 ? 0 : 1);
