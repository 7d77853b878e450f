// The sidecar's own claims, checked without reading its weights: the rope fingerprints it states
// must be those of the parameters it states, its profile fingerprint that of its profile, and its
// geometry fingerprint that of its geometry and stated weights digest. A hand-edited sidecar.json
// fails here by field; a stale but self-consistent one passes here and is caught by the table
// comparison and the bridge-vs-native check. The decoder's profile (PD_DECODER_PROFILE) must be
// the one the sidecar was exported under.
import { sidecarFingerprint } from '../../src/wire/sidecar-format.ts'
import { PdBridgeError } from '../../src/errors.ts'
import { LAYER_TYPES } from '../../src/model/config.ts'
import { getProfile, profileFingerprint, type NumericsProfile } from '../../src/model/profiles/index.ts'
import { ropeFingerprint } from '../../src/model/rope.ts'
import type { Finding } from './finding.ts'
import type { LaunchParams } from './launch.ts'
import type { SidecarPlace } from './places.ts'

/** The sidecar findings, and the decoder profile the gate goes on with (null when unknown). */
export function checkSidecarClaims (sidecar: SidecarPlace, launch: LaunchParams | undefined): { findings: Finding[], profile: NumericsProfile | null } {
  const { json, file } = sidecar
  const findings: Finding[] = []
  const fail = (field: string, message: string, where = file) => findings.push({ check: 'sidecar', rule: 'claims', status: 'fail', file: where, field, message })
  for (const type of LAYER_TYPES) {
    const want = ropeFingerprint(json.ropeParameters[type], json.maxPositionEmbeddings)
    if (json.ropeFingerprints[type] !== want) fail(`ropeFingerprints.${type}`, `is ${json.ropeFingerprints[type]} but ropeParameters.${type} and maxPositionEmbeddings give ${want}: sidecar.json was edited by hand; re-run export-weights`)
  }
  const pf = profileFingerprint(json.profile)
  if (pf !== json.profileFingerprint) fail('profileFingerprint', `is ${json.profileFingerprint} but the profile's data hashes to ${pf}`)
  const geometry = sidecarFingerprint(json, json.weights.sha256)
  if (geometry !== json.fingerprint) fail('fingerprint', `is ${json.fingerprint} but the geometry and weights digest give ${geometry}: sidecar.json was edited by hand; re-run export-weights`)

  let profile: NumericsProfile | null = json.profile
  if (launch?.decoderProfile !== undefined) {
    try {
      const decoder = getProfile(launch.decoderProfile)
      if (profileFingerprint(decoder) !== json.profileFingerprint) {
        fail('profile', `is ${json.profile.name} (${json.profileFingerprint.slice(0, 12)}), but PD_DECODER_PROFILE is ${launch.decoderProfile} (${profileFingerprint(decoder).slice(0, 12)}): the hook would not compute with the decoder's arithmetic; export the sidecar under the decoder's profile`)
      }
      profile = decoder
    }
    catch (e) {
      if (!(e instanceof PdBridgeError)) throw e
      findings.push({ check: 'sidecar', rule: 'profile', status: 'fail', file: launch.file, field: 'PD_DECODER_PROFILE', message: e.message })
      profile = null
    }
  }
  if (findings.length === 0) findings.push({ check: 'sidecar', rule: 'claims', status: 'pass', file, message: `rope, profile (${json.profile.name}) and geometry fingerprints match what sidecar.json states` })
  return { findings, profile }
}
