// The subset of the JobSet API (jobset.x-k8s.io/v1alpha2) that deploy/k8s uses, written from the
// published API reference (the JobSet types: JobSetSpec, ReplicatedJob, Network, SuccessPolicy,
// FailurePolicy, FailurePolicyRule, VolumeClaimPolicy, VolumeRetentionPolicy), and the Kueue
// queue label. No CRD is at hand offline, so this is a hand-written JSON-schema subset checked by
// a small validator: types, required fields, enums, bounds, patterns, and no unknown fields
// (stricter than the API server, so that a misspelt field fails). Each replicated job's template
// is a batch/v1 JobTemplateSpec and each volume claim template a core/v1 PersistentVolumeClaim,
// checked by validate_objects.js against the Kubernetes schemas of kubernetes-models.
//
// Versions: `since` on a field, and `enumSince` on an enum's values, name the JobSet release
// that added them after v0.10.0 (from the JobSet changelogs: volumeClaimPolicies and the
// InPlaceRestart strategy in v0.11.0, the RestartJob actions in v0.12.0). checkJobSet(obj,
// version) checks against that release's API: a newer field is an unknown field there, as a
// strict `kubectl apply` against that release's CRD reports it (a non-strict one drops it
// silently). Without a version: the newest API. Releases before v0.10.0 are not modelled.
'use strict';

const OLDEST_MODELLED = 'v0.10.0';

const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
// RFC 1035 labels (a letter first): the JobSet's webhook requires them of the generated Job and
// pod names and of the subdomain (also a Service name).
const DNS_1035 = '^[a-z]([-a-z0-9]*[a-z0-9])?$';
// DNS-1123 subdomain: a claim template's name (the JobSet webhook's rule).
const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
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
            restartStrategy: {
              enum: ['Recreate', 'BlockingRecreate', 'InPlaceRestart'],
              enumSince: {InPlaceRestart: 'v0.11.0'},
            },
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
                    enumSince: {RestartJob: 'v0.12.0', RestartJobAndIgnoreMaxRestarts: 'v0.12.0'},
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
        // PVCs the JobSet controller makes (<template>-<jobset>) and mounts where a container
        // mounts a volume of the template's name; whenDeleted: Delete makes the JobSet their
        // owner. Each template: a core/v1 PersistentVolumeClaim (kubernetes-models).
        volumeClaimPolicies: {
          since: 'v0.11.0',
          type: 'array',
          maxItems: 50,
          items: {
            type: 'object',
            additionalProperties: false,
            properties: {
              templates: {
                type: 'array',
                maxItems: 50,
                items: {
                  type: 'object',
                  required: ['metadata'],
                  properties: {
                    metadata: {
                      type: 'object',
                      required: ['name'],
                      properties: {name: {type: 'string', pattern: DNS_SUBDOMAIN, maxLength: 253}},
                    },
                  },
                },
              },
              retentionPolicy: {
                type: 'object',
                additionalProperties: false,
                properties: {whenDeleted: {enum: ['Delete', 'Retain']}},
              },
            },
          },
        },
      },
    },
  },
};

// 'v0.11.0' -> [0, 11, 0].
function release(version) {
  const m = /^v(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!m) throw new Error(`not a JobSet release: ${version}`);
  return m.slice(1).map(Number);
}

function older(a, b) {
  const x = release(a);
  const y = release(b);
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] < y[i];
  return false;
}

function typeOf(v) {
  if (Array.isArray(v)) return 'array';
  if (v === null) return 'null';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

// Appends 'path: problem' strings to `out` (none when valid). ctx.version: the JobSet release
// checked against (null: the newest); ctx.needs: the releases that added what `v` uses.
function check(s, v, path, out, ctx) {
  if (s.enum && !s.enum.includes(v)) out.push(`${path}: ${JSON.stringify(v)} not in ${s.enum}`);
  const valueSince = s.enumSince && s.enumSince[v];
  if (valueSince) {
    ctx.needs.push(valueSince);
    if (ctx.version && older(ctx.version, valueSince)) {
      out.push(`${path}: ${JSON.stringify(v)} not in JobSet ${ctx.version} ` +
               `(added in ${valueSince})`);
    }
  }
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
    if (s.items) v.forEach((x, i) => check(s.items, x, `${path}[${i}]`, out, ctx));
  }
  if (typeOf(v) === 'object') {
    for (const r of s.required || []) if (!(r in v)) out.push(`${path}.${r}: required`);
    for (const [key, x] of Object.entries(v)) {
      const p = `${path}.${key}`;
      const field = s.properties && key in s.properties ? s.properties[key] : null;
      if (field && field.since) ctx.needs.push(field.since);
      if (field && !(field.since && ctx.version && older(ctx.version, field.since))) {
        check(field, x, p, out, ctx);
      } else if (field) {
        out.push(`${p}: unknown field in JobSet ${ctx.version} (added in ${field.since})`);
      } else if (s.additionalProperties === false) {
        out.push(`${p}: unknown field`);
      } else if (typeof s.additionalProperties === 'object') {
        check(s.additionalProperties, x, p, out, ctx);
      }
    }
  }
  return out;
}

// The volume names a pod template's containers and init containers mount.
function mountedVolumes(podSpec) {
  const names = new Set();
  for (const c of [...(podSpec.initContainers || []), ...(podSpec.containers || [])]) {
    for (const m of c.volumeMounts || []) names.add(m.name);
  }
  return names;
}

// Semantics the API's webhook checks beyond the schema: unique replicated job names, policy
// targets that exist, and pod names (<jobset>-<replicatedJob>-<j>-<i>-<5 random characters>)
// that fit an RFC 1035 label; claim templates with unique names, no namespace, a claim name
// <template>-<jobset> of 63 characters at most, mounted (by name) by a container or init
// container of some replicated job, and no replicated job declaring a volume of that name (the
// controller adds it).
// Returns {problems: ['path: problem', ...], needs: the oldest JobSet release it can run on
// (OLDEST_MODELLED when it uses nothing newer)}.
function checkJobSet(obj, version) {
  if (version && older(version, OLDEST_MODELLED)) {
    throw new Error(`JobSet ${version} is not modelled (${OLDEST_MODELLED} and later are)`);
  }
  const ctx = {version: version || null, needs: [OLDEST_MODELLED]};
  const out = check(schema, obj, 'JobSet', [], ctx);
  const needs = ctx.needs.reduce((a, b) => (older(a, b) ? b : a));
  if (out.length) return {problems: out, needs};
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
  const claims = new Set();
  for (const policy of obj.spec.volumeClaimPolicies || []) {
    for (const t of policy.templates || []) {
      const claim = t.metadata.name;
      if (claims.has(claim)) out.push(`claim template ${claim}: duplicate name`);
      claims.add(claim);
      if ('namespace' in t.metadata) out.push(`claim template ${claim}: a namespace`);
      const pvc = `${claim}-${obj.metadata.name}`;
      if (pvc.length > 63) out.push(`claim ${pvc} longer than 63`);
      const pods = obj.spec.replicatedJobs.map(
          (r) => ((r.template.spec || {}).template || {}).spec || {});
      if (!pods.some((p) => mountedVolumes(p).has(claim))) {
        out.push(`claim template ${claim}: no container mounts it`);
      }
      obj.spec.replicatedJobs.forEach((r, i) => {
        if ((pods[i].volumes || []).some((v) => v.name === claim)) {
          out.push(`${r.name}: declares a volume ${claim}, a claim template's name`);
        }
      });
    }
  }
  return {problems: out, needs};
}

module.exports = {checkJobSet, OLDEST_MODELLED};
