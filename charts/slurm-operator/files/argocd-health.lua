-- Argo CD health check for slurm.hpc.dev/SlurmCluster, from the status conditions the operator
-- writes on every reconcile (docs/argocd.md).
--   Healthy:     Available is True for the current generation, and nothing is in progress.
--   Progressing: the operator has not seen the current generation yet; the jail is being
--                populated; workers are scaling down or being replaced; a Slurm upgrade
--                waits for its next stage; pods are starting.
--   Degraded:    the spec cannot be rendered, is refused by policy or asks for Slurm releases
--                that cannot follow what runs, the munge key is gone,
--                the populate Job failed, the backup before an upgrade failed, the API server
--                refuses objects, or a reconcile fails.
--   Suspended:   an upgrade waits for spec.upgrades.backup (a volume, or skip).
local hs = {}

local function condition(t)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end

local function say(status, c, fallback)
  hs.status = status
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    hs.message = c.type .. ": " .. c.message
  else
    hs.message = fallback
  end
  return hs
end

local generation = obj.metadata.generation or 0
local observed = 0
if obj.status ~= nil and obj.status.observedGeneration ~= nil then
  observed = obj.status.observedGeneration
end
local available = condition("Available")
if available == nil or observed < generation then
  return say("Progressing", nil, "Waiting for the operator to see generation " .. generation)
end

-- Failures that waiting does not mend.
local failed = {RenderFailed = true, PolicyViolation = true, MungeKeyMissing = true,
  JWTKeyMissing = true, SSHHostKeysMissing = true, ControllerStateUnreadable = true,
  ReconcileFailed = true, ApplyFailed = true, JobFailed = true, SlurmReleaseRefused = true}
for _, t in ipairs({"Available", "Degraded", "JailPopulated"}) do
  local c = condition(t)
  if c ~= nil and failed[c.reason] and (c.status == "False" or t == "Degraded") then
    return say("Degraded", c, t .. " " .. c.reason)
  end
end

-- An upgrade held before it starts: its backup failed (Degraded), or the spec must say where the
-- backup goes or that there is none (Suspended: it waits for the admin, not for time).
local upgrading = condition("SlurmUpgrading")
if upgrading ~= nil and upgrading.status == "True" then
  if upgrading.reason == "BackupFailed" then
    return say("Degraded", upgrading, "SlurmUpgrading BackupFailed")
  elseif upgrading.reason == "BackupNotConfigured" then
    return say("Suspended", upgrading, "SlurmUpgrading BackupNotConfigured")
  end
end

-- Work under way.
local jail = condition("JailPopulated")
if jail ~= nil and jail.status == "False" then
  return say("Progressing", jail, "The jail is being populated")
end
for _, t in ipairs({"ScalingDown", "WorkersUpdating", "SlurmUpgrading"}) do
  local c = condition(t)
  if c ~= nil and c.status == "True" then
    return say("Progressing", c, t)
  end
end

if available.status == "True" then
  -- A Degraded condition left here is a warning (an optional API missing, a spec value not
  -- used): the cluster serves jobs.
  local degraded = condition("Degraded")
  if degraded ~= nil and degraded.status == "True" then
    return say("Healthy", degraded, "Available")
  end
  return say("Healthy", available, "Available")
end
return say("Progressing", available, "Waiting for the cluster to become available")
