// Validates Kubernetes objects offline. Built-in kinds: against the OpenAPI schemas bundled in
// the npm package kubernetes-models (ajv). JobSet (jobset.x-k8s.io/v1alpha2): its own fields
// against jobset_schema.js (written from the JobSet API reference), each replicated job's
// template as a batch/v1 Job of kubernetes-models. Input: a JSON array of objects on stdin.
// Output: one line per object; exit 1 when any object is invalid or of a kind neither knows.
// Usage: NODE_PATH=<dir>/node_modules node validate_objects.js < objects.json
'use strict';

const {checkJobSet} = require('./jobset_schema.js');

function modulePath(apiVersion, kind) {
  const slash = apiVersion.indexOf('/');
  if (slash < 0) return `kubernetes-models/${apiVersion}/${kind}`;  // core group: v1
  return `kubernetes-models/${apiVersion.slice(0, slash)}/${apiVersion.slice(slash + 1)}/${kind}`;
}

function validateBuiltin(obj) {
  const Model = require(modulePath(obj.apiVersion, obj.kind))[obj.kind];
  new Model(obj).validate();
}

function validate(obj) {
  if (obj.apiVersion === 'jobset.x-k8s.io/v1alpha2' && obj.kind === 'JobSet') {
    const problems = checkJobSet(obj);
    if (problems.length) throw new Error(problems.join('; '));
    for (const r of obj.spec.replicatedJobs) {
      try {
        validateBuiltin({apiVersion: 'batch/v1', kind: 'Job',
                         metadata: {name: `${obj.metadata.name}-${r.name}-0`,
                                    ...(r.template.metadata || {})},
                         spec: r.template.spec});
      } catch (e) {
        throw new Error(`replicatedJob ${r.name}: ${e.message}`);
      }
    }
    return;
  }
  validateBuiltin(obj);
}

const objects = JSON.parse(require('fs').readFileSync(0, 'utf8'));
let failures = 0;
for (const obj of objects) {
  const name = `${obj.apiVersion} ${obj.kind} ${obj.metadata && obj.metadata.name}`;
  try {
    validate(obj);
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`);
    failures++;
  }
}
console.log(`${objects.length - failures}/${objects.length} objects valid`);
process.exit(failures === 0 && objects.length > 0 ? 0 : 1);
