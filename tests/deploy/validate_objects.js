// Validates Kubernetes objects offline. Built-in kinds: against the OpenAPI schemas bundled in
// the npm package kubernetes-models (ajv). JobSet (jobset.x-k8s.io/v1alpha2): its own fields
// against jobset_schema.js (written from the JobSet API reference), each replicated job's
// template as a batch/v1 Job and each volume claim template as a core/v1 PersistentVolumeClaim of
// kubernetes-models; against the API of the JobSet release JOBSET_VERSION (e.g. v0.11.0) when
// that is set, else the newest. Input: a JSON array of objects on stdin. Output: one line per
// object (a JobSet's says which JobSet release it needs at least); exit 1 when any object is
// invalid or of a kind neither knows.
// Usage: [JOBSET_VERSION=vX.Y.Z] NODE_PATH=<dir>/node_modules node validate_objects.js < in.json
'use strict';

const {checkJobSet, OLDEST_MODELLED} = require('./jobset_schema.js');

function modulePath(apiVersion, kind) {
  const slash = apiVersion.indexOf('/');
  if (slash < 0) return `kubernetes-models/${apiVersion}/${kind}`;  // core group: v1
  return `kubernetes-models/${apiVersion.slice(0, slash)}/${apiVersion.slice(slash + 1)}/${kind}`;
}

function validateBuiltin(obj) {
  const Model = require(modulePath(obj.apiVersion, obj.kind))[obj.kind];
  new Model(obj).validate();
}

// Returns a note for the object's line ('' for none).
function validate(obj) {
  if (obj.apiVersion === 'jobset.x-k8s.io/v1alpha2' && obj.kind === 'JobSet') {
    const {problems, needs} = checkJobSet(obj, process.env.JOBSET_VERSION || null);
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
    for (const policy of obj.spec.volumeClaimPolicies || []) {
      for (const t of policy.templates || []) {
        try {
          validateBuiltin({apiVersion: 'v1', kind: 'PersistentVolumeClaim', metadata: t.metadata,
                           spec: t.spec});
        } catch (e) {
          throw new Error(`volume claim template ${t.metadata.name}: ${e.message}`);
        }
      }
    }
    // OLDEST_MODELLED: nothing newer is used (older releases are not modelled).
    return needs === OLDEST_MODELLED ? ` (nothing newer than JobSet ${needs})`
                                     : ` (needs JobSet ${needs} or later)`;
  }
  validateBuiltin(obj);
  return '';
}

const objects = JSON.parse(require('fs').readFileSync(0, 'utf8'));
let failures = 0;
for (const obj of objects) {
  const name = `${obj.apiVersion} ${obj.kind} ${obj.metadata && obj.metadata.name}`;
  try {
    const note = validate(obj);
    console.log(`ok   ${name}${note}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message.split('\n')[0]}`);
    failures++;
  }
}
console.log(`${objects.length - failures}/${objects.length} objects valid`);
process.exit(failures === 0 && objects.length > 0 ? 0 : 1);
