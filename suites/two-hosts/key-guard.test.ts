// The deployment key beyond loopback: a service asked to listen on another host's reach (a LAN
// address, 0.0.0.0, ::) without PD_API_KEY is refused with a sentence naming the variable;
// loopback stays open without a key, as the embedded stack and the tests run it.
import { describe, expect, it } from 'vitest'
import { isLoopbackHost, keyRequiredProblem } from '../../src/http/api-key.ts'

describe('keyRequiredProblem', () => {
  it('lets loopback listen without a key', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]']) {
      expect(isLoopbackHost(host)).toBe(true)
      expect(keyRequiredProblem(host, undefined)).toBeNull()
    }
  })

  it('refuses every other address without a key, naming the host and PD_API_KEY', () => {
    for (const host of ['0.0.0.0', '::', '198.18.0.1', '10.0.0.2', 'prefill.lan', '127.0.0.1.example', '1127.0.0.1']) {
      expect(isLoopbackHost(host)).toBe(false)
      const problem = keyRequiredProblem(host, undefined)
      expect(problem).toContain(host)
      expect(problem).toContain('PD_API_KEY')
    }
  })

  it('lets any address listen with a key', () => {
    expect(keyRequiredProblem('0.0.0.0', 'k')).toBeNull()
    expect(keyRequiredProblem('198.18.0.2', 'k')).toBeNull()
  })
})
