print("impairment-relay: being written")
