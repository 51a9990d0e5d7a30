// The subset of the JobSet API (jobset.x-k8s.io/v1alpha2) that deploy/k8s uses, written from the
// published API reference (the JobSet types: JobSetSpec, ReplicatedJob, Network, SuccessPolicy,
// FailurePolicy, FailurePolicyRule), and the Kueue queue label. No CRD is at hand offline, so
// this is a hand-written JSON-schema subset checked by a small validator: types, required fields,
// enums, bounds, patterns, and no unknown fields (stricter than the API server, so that a
// misspelt field fails). Each replicated job's template is a batch/v1 JobTemplateSpec, checked by
// validate_objects.js against the Kubernetes schemas of kubernetes-models.
'use strict';

const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
// RFC 1035 labels (a letter first): the JobSet's webhook requires them of the generated Job and
// pod names and of the subdomain (also a Service name).
const DNS_1035 = '^[a-z]([-a-z0-9]*[a-z0-9])?$';
const JOB_FAILURE_REASONS = ['BackoffLimitExceeded', 'DeadlineExceeded', 'FailedIndexes',
                             'MaxFailedIndexesExceeded', 'PodFailurePolicy'];

const schema = {
  type: 'object',
  required: ['apiVersion', 'kind', 'metadata', 'spec'],
  additionalProperties: false,
  properties: {
    apiVersion: {enum: ['jobset.x-k8s.io/v1alpha2']},
    kind: {enum: ['JobSet']},
    metadata: {
      type: 'object',
      required: ['name'],
      properties: {
        // The JobSet's name starts every Job and pod name: an RFC 1035 label.
        name: {type: 'string', pattern: DNS_1035, maxLength: 63},
        labels: {
          type: 'object',
          additionalProperties: {type: 'string', maxLength: 63},
          properties: {
            // Kueue: the LocalQueue (in the JobSet's namespace) that admits the whole set.
            'kueue.x-k8s.io/queue-name': {type: 'string', pattern: DNS_LABEL, maxLength: 63},
          },
        },
        annotations: {type: 'object', additionalProperties: {type: 'string'}},
      },
    },
    spec: {
      type: 'object',
      required: ['replicatedJobs'],
      additionalProperties: false,
      properties: {
        replicatedJobs: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            required: ['name', 'template'],
            additionalProperties: false,
            properties: {
              name: {type: 'string', pattern: DNS_LABEL, maxLength: 63},
              groupName: {type: 'string'},
              replicas: {type: 'integer', minimum: 0},
              template: {type: 'object'},  // batch/v1 JobTemplateSpec: kubernetes-models
              dependsOn: {
                type: 'array',
                maxItems: 5,
                items: {
                  type: 'object',
                  required: ['name', 'status'],
                  additionalProperties: false,
                  properties: {name: {type: 'string'}, status: {enum: ['Ready', 'Complete']}},
                },
              },
            },
          },
        },
        network: {
          type: 'object',
          additionalProperties: false,
          properties: {
            enableDNSHostnames: {type: 'boolean'},
            subdomain: {type: 'string', pattern: DNS_1035, maxLength: 63},
            publishNotReadyAddresses: {type: 'boolean'},
          },
        },
        successPolicy: {
          type: 'object',
          required: ['operator'],
          additionalProperties: false,
          properties: {
            operator: {enum: ['All', 'Any']},
            targetReplicatedJobs: {type: 'array', items: {type: 'string'}},
          },
        },
        failurePolicy: {
          type: 'object',
          additionalProperties: false,
          properties: {
            maxRestarts: {type: 'integer', minimum: 0},
            restartStrategy: {enum: ['Recreate', 'BlockingRecreate', 'InPlaceRestart']},
            rules: {
              type: 'array',
              items: {
                type: 'object',
                required: ['name', 'action'],
                additionalProperties: false,
                properties: {
                  name: {type: 'string', pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'},
                  action: {
                    enum: ['FailJobSet', 'RestartJobSet', 'RestartJobSetAndIgnoreMaxRestarts',
                           'RestartJob', 'RestartJobAndIgnoreMaxRestarts'],
                  },
                  onJobFailureReasons: {
                    type: 'array', uniqueItems: true, items: {enum: JOB_FAILURE_REASONS},
                  },
                  onJobFailureMessagePatterns: {
                    type: 'array', uniqueItems: true, items: {type: 'string'},
                  },
                  targetReplicatedJobs: {type: 'array', items: {type: 'string'}},
                },
              },
            },
          },
        },
        suspend: {type: 'boolean'},
        ttlSecondsAfterFinished: {type: 'integer', minimum: 0},
      },
    },
  },
};

function typeOf(v) {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

// Returns a list of 'path: problem' strings (empty when valid).
function check(s, v, path, out) {
  if (s.enum && !s.enum.includes(v)) out.push(`${path}: ${JSON.stringify(v)} not in ${s.enum}`);
  if (s.type && typeOf(v) !== s.type) {
    out.push(`${path}: ${typeOf(v)}, expected ${s.type}`);
    return out;
  }
  if (typeof v === 'string') {
    if (s.pattern && !new RegExp(s.pattern).test(v)) out.push(`${path}: "${v}" !~ ${s.pattern}`);
    if (s.maxLength !== undefined && v.length > s.maxLength) out.push(`${path}: too long`);
  }
  if (typeof v === 'number' && s.minimum !== undefined && v < s.minimum) {
    out.push(`${path}: ${v} < ${s.minimum}`);
  }
  if (Array.isArray(v)) {
    if (s.minItems !== undefined && v.length < s.minItems) out.push(`${path}: too few items`);
    if (s.maxItems !== undefined && v.length > s.maxItems) out.push(`${path}: too many items`);
    if (s.uniqueItems && new Set(v.map((x) => JSON.stringify(x))).size !== v.length) {
      out.push(`${path}: duplicate items`);
    }
    if (s.items) v.forEach((x, i) => check(s.items, x, `${path}[${i}]`, out));
  }
  if (typeOf(v) === 'object') {
    for (const r of s.required || []) if (!(r in v)) out.push(`${path}.${r}: required`);
    for (const [key, x] of Object.entries(v)) {
      const p = `${path}.${key}`;
      if (s.properties && key in s.properties) check(s.properties[key], x, p, out);
      else if (s.additionalProperties === false) out.push(`${p}: unknown field`);
      else if (typeof s.additionalProperties === 'object') check(s.additionalProperties, x, p, out);
    }
  }
  return out;
}

// Semantics the API's webhook checks beyond the schema: unique replicated job names, policy
// targets that exist, and pod names (<jobset>-<replicatedJob>-<j>-<i>-<5 random characters>)
// that fit an RFC 1035 label.
function checkJobSet(obj) {
  const out = check(schema, obj, 'JobSet', []);
  if (out.length) return out;
  const names = obj.spec.replicatedJobs.map((r) => r.name);
  if (new Set(names).size !== names.length) out.push('replicatedJobs: duplicate names');
  const targets = [...((obj.spec.successPolicy || {}).targetReplicatedJobs || [])];
  for (const rule of (obj.spec.failurePolicy || {}).rules || []) {
    targets.push(...(rule.targetReplicatedJobs || []));
  }
  for (const t of targets) if (!names.includes(t)) out.push(`target ${t}: no such replicatedJob`);
  for (const r of obj.spec.replicatedJobs) {
    const spec = (r.template || {}).spec || {};
    const pod = `${obj.metadata.name}-${r.name}-${(r.replicas || 1) - 1}-` +
                `${(spec.completions || 1) - 1}-abcde`;
    if (pod.length > 63) out.push(`${r.name}: pod name ${pod} longer than 63`);
  }
  return out;
}

module.exports = {checkJobSet};
