import Calls
import Keys
import XCTest

final class KeyMapTests: XCTestCase {
    func testConfigurationTextMapsCodesAndNamesToActions() throws {
        let map = try KeyMap.parse(["59": "call:1", "KEY_F2": "call:empfang", "BTN_0": "hang_up",
                                    "key_micmute": "toggle_mic_mute", "KEY_MUTE": "toggle_speaker_mute", "KEY_ESC": "toggle_dnd"])
        XCTAssertEqual(map[59], .callButton(1))
        XCTAssertEqual(map[KeyMap.keyCode("KEY_F1")! + 1], .perform(.call(button: "empfang")))
        XCTAssertEqual(map[0x100], .perform(.hangUp))
        XCTAssertEqual(map[KeyMap.keyCode("KEY_MICMUTE")!], .perform(.toggleMicrophoneMute))
        XCTAssertEqual(map[KeyMap.keyCode("KEY_MUTE")!], .perform(.toggleSpeakerMute))
        XCTAssertEqual(map[1], .perform(.toggleDoNotDisturb))
        XCTAssertNil(map[2])
        for action in map.actions.values {
            XCTAssertEqual(KeyAction(configValue: action.description), action, "description is the config spelling")
        }
    }

    func testBadEntriesNameTheKey() {
        func problem(_ entries: [String: String]) -> KeyMapError? {
            do { _ = try KeyMap.parse(entries); return nil } catch { return error }
        }
        XCTAssertEqual(problem(["KEY_NOPE": "hang_up"])?.key, "KEY_NOPE")
        XCTAssertEqual(problem(["\(KeyMap.maxKeyCode + 1)": "hang_up"])?.key, "\(KeyMap.maxKeyCode + 1)")
        let bad = problem(["60": "explode"])
        XCTAssertEqual(bad?.key, "60")
        XCTAssertTrue(bad?.description.contains("explode") ?? false, bad?.description ?? "")
        XCTAssertNotNil(problem(["60": "call:0"]), "buttons count from 1")
        XCTAssertNotNil(problem(["60": "call:"]))
        XCTAssertTrue(problem(["60": "hang_up", "KEY_F2": "toggle_dnd"])?.description.contains("already mapped") ?? false)
    }

    func testActionsBecomeCallCommands() {
        let buttons = ["empfang", "all-rooms"]
        XCTAssertEqual(KeyAction.callButton(2).command(buttons: buttons), .call(button: "all-rooms"))
        XCTAssertEqual(KeyAction.perform(.call(button: "empfang")).command(buttons: buttons), .call(button: "empfang"))
        XCTAssertNil(KeyAction.callButton(3).command(buttons: buttons))
        XCTAssertNil(KeyAction.perform(.call(button: "kitchen")).command(buttons: buttons))
        XCTAssertEqual(KeyAction.perform(.hangUp).command(buttons: buttons), .hangUp)
        XCTAssertEqual(KeyAction.perform(.toggleMicrophoneMute).command(buttons: buttons), .toggleMicrophoneMute)
        XCTAssertEqual(KeyAction.perform(.toggleSpeakerMute).command(buttons: buttons), .toggleSpeakerMute)
        XCTAssertEqual(KeyAction.perform(.toggleDoNotDisturb).command(buttons: buttons), .toggleDoNotDisturb)
    }
}
